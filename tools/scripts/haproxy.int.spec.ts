// deploy/haproxy/llmgw.cfg as Debian's haproxy reads it: `haproxy -c` accepts it, and, run in
// front of two routers stand-ins, its /readyz checks keep requests off the one that is not ready
// (a router draining after SIGTERM, or still waiting for its first routing table).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot, spawnProcess, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';

const HAPROXY = '/usr/sbin/haproxy';
const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

/** The shipped file with its `bind` port and server lines replaced (nothing else changed). */
function render(port: number, routers: readonly string[]): string {
  const shipped = readFileSync(join(repoRoot(), 'deploy', 'haproxy', 'llmgw.cfg'), 'utf8');
  const servers = routers.map((r, i) => `    server router-${i + 1} ${r} check`).join('\n');
  const out = shipped.replace('    bind :8000', `    bind 127.0.0.1:${port}`).replace(/(    server router-\d+ \S+ check\n?)+/, `${servers}\n`);
  if (!out.includes(`bind 127.0.0.1:${port}`) || !out.includes(servers)) throw new Error('deploy/haproxy/llmgw.cfg: the bind or server lines the test rewrites are gone');
  return out;
}

function check(file: string): { status: number | null; output: string } {
  const r = spawnSync(HAPROXY, ['-c', '-f', file], { encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** A router stand-in: /readyz answers 200 or 503 as set; anything else says which one answered. */
async function standIn(name: string): Promise<{ server: Server; address: string; ready: boolean }> {
  const s = { server: createServer(), address: '', ready: true };
  s.server.on('request', (req, res) => {
    if (req.url === '/readyz') {
      res.writeHead(s.ready ? 200 : 503).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(name);
  });
  await new Promise<void>((resolve) => s.server.listen(0, '127.0.0.1', resolve));
  s.address = `127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  cleanups.push(() => new Promise((resolve) => s.server.close(resolve)));
  return s;
}

describe('deploy/haproxy', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-haproxy-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));

  it('haproxy -c accepts llmgw.cfg as shipped and rendered for 1 and 5 routers', () => {
    expect(check(join(repoRoot(), 'deploy', 'haproxy', 'llmgw.cfg'))).toMatchObject({ status: 0, output: expect.stringContaining('Configuration file is valid') });
    for (const n of [1, 5]) {
      const file = join(dir, `llmgw-${n}.cfg`);
      writeFileSync(file, render(18_200, Array.from({ length: n }, (_, i) => `127.0.0.1:${18_300 + i}`)));
      expect(check(file)).toMatchObject({ status: 0 });
    }
  });

  it('sends no request to a router whose /readyz says not ready, and takes it back once it is', async () => {
    const [a, b] = [await standIn('router-a'), await standIn('router-b')];
    b.ready = false;
    const port = await freePort();
    const file = join(dir, 'run.cfg');
    writeFileSync(file, render(port, [a.address, b.address]));
    const proc = await spawnProcess({ command: HAPROXY, args: ['-db', '-f', file], name: 'haproxy', deadlineMs: 15_000 });
    cleanups.push(() => proc.stop('SIGTERM', 5_000));
    const ask = async (): Promise<string> => (await fetch(`http://127.0.0.1:${port}/v1/models`)).text();
    // haproxy logs the check that takes router-b out; from then on every answer is router-a's.
    await waitFor(() => /Server llmgw_routers\/router-2 is DOWN/.test(proc.stdout + proc.stderr), { deadlineMs: 10_000, message: 'router-b marked down' });
    const answers = await Promise.all(Array.from({ length: 20 }, ask));
    expect(new Set(answers)).toEqual(new Set(['router-a']));
    b.ready = true;
    await waitFor(async () => (await Promise.all(Array.from({ length: 10 }, ask))).includes('router-b'), { deadlineMs: 15_000, message: 'router-b back in' });
  }, 60_000);
});
