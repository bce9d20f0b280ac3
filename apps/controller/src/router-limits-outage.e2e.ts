// Key limits when the shared Redis goes away and comes back, with three real router processes:
// while it is down each router enforces the limit ÷ 3 (the routers the controller counts), says
// so in a metric and in /readyz, and refuses neither everything nor nothing; once it is back the
// fleet shares the exact limit again.
import { createHash, randomUUID } from 'node:crypto';
import { openStore } from '@llmgw/store';
import { sqliteBackend, startRedis, stopAllSpawned, waitFor, type RedisServer } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, startRouterProcesses } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

describe('key limits through a Redis outage', () => {
  it('hold at limit ÷ 3 per router while Redis is down, say so, and are exact again once it is back', async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    cleanups.push(() => db.drop(), () => file.cleanup());
    const routerToken = 'router-outage-token-0123456789';
    const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '500ms', LLMGW_CONTROLLER_ROUTER_TOKEN: routerToken });
    cleanups.push(() => controller.close());
    const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'sim' });
    cleanups.push(() => agent.stop());
    agent.connect();
    const store = await openStore(db.url, { migrate: false });
    cleanups.push(() => store.close());
    const secret = `llmgw-outage-${randomUUID()}`;
    await store.apiKeys.create('outage', { owner: 'ops', models: ['*'], limits: { requestsPerMinute: 30 } }, createHash('sha256').update(secret).digest('hex'));
    let redis: RedisServer = await startRedis();
    cleanups.push(() => redis.stop());
    const port = redis.port;

    const { processes: routers, bases } = await startRouterProcesses(3, (i) => ({
      LLMGW_ROUTER_ID: `outage-${i}`,
      LLMGW_ROUTER_CONTROLLER: controller.grpc,
      LLMGW_ROUTER_CONTROLLER_TOKEN: routerToken,
      LLMGW_REDIS_URL: redis.url,
      LLMGW_ROUTER_REDIS_TIMEOUT: '500ms',
    }));
    cleanups.push(() => Promise.all(routers.map((r) => r.stop())));
    const chat = (base: string) =>
      fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` }, body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }) });
    const metric = async (base: string): Promise<number> => Number(/^llmgw_router_limits_degraded (\S+)$/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1] ?? 'NaN');
    const readyDetail = async (base: string) => ((await (await fetch(`${base}/readyz`)).json()) as { checks: Record<string, { detail?: { mode?: string } }> }).checks['key-limits']?.detail?.mode;
    // Every router serves and counts three routers before anything is measured.
    await waitFor(async () => (await Promise.all(bases.map(async (b) => (await fetch(`${b}/readyz`)).status))).every((s) => s === 200), { deadlineMs: 60_000, message: 'routers ready' });
    await waitFor(() => controller.plane.publisher.current()?.routers === 3, { deadlineMs: 20_000, message: 'the controller counts three routers' });
    await waitFor(async () => (await chat(bases[0])).status === 200, { deadlineMs: 60_000, message: 'a first answer through Redis' });
    expect(await readyDetail(bases[0])).toBe('shared (Redis)');

    await redis.kill9();
    const during: number[] = [0, 0, 0];
    for (let i = 0; i < 60; i++) if ((await chat(bases[i % 3])).status === 200) during[i % 3]++;
    process.stdout.write(`[outage] Redis down, limit 30/min over 3 routers: answered per router ${JSON.stringify(during)}\n`);
    expect(during).toEqual([10, 10, 10]);
    for (const b of bases) {
      expect(await metric(b)).toBe(1);
      expect(await readyDetail(b)).toBe('per-router share (Redis unreachable)');
    }
    for (const r of routers) expect(r.stdout.match(/Redis unreachable: enforcing each key limit divided/g)?.length).toBe(1);

    redis = await startRedis({ port });
    // Back on Redis (empty: the killed server kept nothing), the fleet shares the exact limit again:
    // everything answered from here on, the probes included, adds up to exactly 30.
    let answered = 0;
    await waitFor(
      async () => {
        for (const b of bases) if ((await chat(b)).status === 200) answered++;
        return (await Promise.all(bases.map(metric))).every((m) => m === 0);
      },
      { deadlineMs: 20_000, intervalMs: 1_100, message: 'every router back on Redis' },
    );
    const probes = answered;
    for (let i = 0; i < 60; i++) if ((await chat(bases[i % 3])).status === 200) answered++;
    process.stdout.write(`[outage] Redis back: ${answered} answered in all (${probes} while the routers found it again)\n`);
    expect(answered).toBe(30);
    expect(await readyDetail(bases[1])).toBe('shared (Redis)');
  }, 180_000);
});
