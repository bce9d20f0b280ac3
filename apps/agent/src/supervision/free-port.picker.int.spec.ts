import { createServer, type Server } from 'node:net';
import { freePort } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { ephemeralPortRange, parsePortRange, pickPortInRange, rangesOverlap } from './free-port.picker';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

function hold(port: number): Promise<void> {
  const server = createServer();
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve());
  });
}

describe('engine port range', () => {
  it.each([
    ['20000-29999', { first: 20_000, last: 29_999 }],
    [' 40000-40000 ', { first: 40_000, last: 40_000 }],
    ['41000', { first: 41_000, last: 41_000 }],
  ])('reads %j', (raw, range) => {
    expect(parsePortRange(raw)).toEqual({ ok: true, value: range });
  });

  it.each([
    ['', 'expected a port range FIRST-LAST'],
    ['20000-', 'expected a port range FIRST-LAST'],
    ['a-b', 'expected a port range FIRST-LAST'],
    ['80-90', 'ports must lie in 1024-65535'],
    ['60000-70000', 'ports must lie in 1024-65535'],
    ['30000-20000', 'the first port 30000 is above the last 20000'],
  ])('refuses %j: %s', (raw, reason) => {
    const parsed = parsePortRange(raw);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? '' : parsed.reason).toContain(reason);
  });

  it('picks a port of the range that nothing listens on, skipping taken ones', async () => {
    const taken = await freePort();
    const free = await freePort();
    await hold(taken);
    const range = { first: Math.min(taken, free), last: Math.max(taken, free) };
    const size = range.last - range.first + 1;
    const draw = (port: number) => (port - range.first + 0.5) / size;
    // Two draws land on the taken port, the third on the free one.
    const draws = [draw(taken), draw(taken), draw(free)];
    expect(await pickPortInRange('127.0.0.1', range, () => draws.shift() as number)).toBe(free);
    expect(draws).toEqual([]);
  });

  it('gives up naming the range when every try is taken', async () => {
    const taken = await freePort();
    await hold(taken);
    await expect(pickPortInRange('127.0.0.1', { first: taken, last: taken }, Math.random)).rejects.toThrow(
      `no free port in ${taken}-${taken} on 127.0.0.1 after 64 tries; widen LLMGW_AGENT_ENGINE_PORTS`,
    );
  });

  it('answers at once for an address this host does not have', async () => {
    await expect(pickPortInRange('192.0.2.1', { first: 20_000, last: 20_010 }, Math.random)).rejects.toThrow(/EADDRNOTAVAIL/);
  });

  it('reads the kernel ephemeral range and tells overlapping ranges', () => {
    expect(ephemeralPortRange(() => '32768\t60999\n')).toEqual({ first: 32_768, last: 60_999 });
    expect(ephemeralPortRange(() => 'garbage')).toBeUndefined();
    expect(
      ephemeralPortRange(() => {
        throw new Error('ENOENT');
      }),
    ).toBeUndefined();
    expect(rangesOverlap({ first: 20_000, last: 29_999 }, { first: 32_768, last: 60_999 })).toBe(false);
    expect(rangesOverlap({ first: 30_000, last: 40_000 }, { first: 32_768, last: 60_999 })).toBe(true);
  });
});
