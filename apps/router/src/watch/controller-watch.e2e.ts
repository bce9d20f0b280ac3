// The router following a controller over the real RouterService gRPC contract: readiness
// waits for the first snapshot, older revisions are ignored, endpoints that survive an update
// keep their live state, a removed one finishes what it has, a controller restart resyncs
// everything, and usage goes back once a tick.
import { waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FakeController,
  FakeUpstream,
  postJson,
  protoSnapshot,
  sampleValue,
  startRouter,
  tempDir,
  writeRouterConfig,
  type RouterUnderTest,
} from '../test/router.harness';
import type { UsageSink } from '../usage/usage.sink';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function controller(): Promise<FakeController> {
  const c = new FakeController();
  await c.start();
  cleanups.push(() => c.stop());
  return c;
}

async function upstream(): Promise<FakeUpstream> {
  const u = await FakeUpstream.start();
  cleanups.push(() => u.close());
  return u;
}

async function router(c: FakeController, env: Record<string, string> = {}): Promise<RouterUnderTest> {
  const r = await startRouter({
    LLMGW_ROUTER_CONTROLLER: c.address,
    LLMGW_ROUTER_WATCH_BACKOFF_MIN: '20ms',
    LLMGW_ROUTER_WATCH_BACKOFF_MAX: '200ms',
    ...env,
  });
  cleanups.push(() => r.close());
  return r;
}

const chat = (model = 'm1'): object => ({ model, messages: [{ role: 'user', content: 'hi' }] });

describe('watching the controller', () => {
  it('is not ready until the first snapshot, then serves it', async () => {
    const c = await controller();
    const u = await upstream();
    const r = await router(c);
    await waitFor(() => c.watchers.size === 1, { message: 'router watching' });

    const before = await fetch(`${r.url}/readyz`);
    expect(before.status).toBe(503);
    expect(await before.json()).toEqual({ status: 'not_ready', checks: { 'routing-table': { ready: false, reason: 'no endpoint snapshot from the controller yet' } } });
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(404);

    c.publish(protoSnapshot(1, [{ replicaId: 'a', model: 'm1', url: u.url }], [{ name: 'm1', aliases: ['first'] }]));
    await waitFor(async () => (await fetch(`${r.url}/readyz`)).status === 200, { message: 'ready' });
    expect((await postJson(`${r.url}/v1/chat/completions`, chat('first'))).status).toBe(200);
    expect(u.hits).toBe(1);
    const models = (await (await fetch(`${r.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['m1', 'first']);
    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(sampleValue(text, 'llmgw_router_watch_connected')).toBe(1);
    expect(sampleValue(text, 'llmgw_router_watch_revision')).toBe(1);
  });

  it('ignores a snapshot older than the one it has', async () => {
    const c = await controller();
    const [a, b] = [await upstream(), await upstream()];
    const r = await router(c);
    c.publish(protoSnapshot(5, [{ replicaId: 'a', model: 'm1', url: a.url }], ['m1']));
    await waitFor(() => r.core.endpoints.revision === 5);
    c.send(protoSnapshot(3, [{ replicaId: 'b', model: 'm1', url: b.url }], ['m1']));
    c.send(protoSnapshot(5, [{ replicaId: 'b', model: 'm1', url: b.url }], ['m1']));
    const text = async (): Promise<string> => (await fetch(`${r.url}/metrics`)).text();
    await waitFor(async () => sampleValue(await text(), 'llmgw_router_watch_snapshots_total', { result: 'stale' }) === 2, { message: 'two stale snapshots seen' });
    expect([...r.core.endpoints.active()].map((e) => e.id)).toEqual(['a']);
    c.send(protoSnapshot(6, [{ replicaId: 'b', model: 'm1', url: b.url }], ['m1']));
    await waitFor(() => r.core.endpoints.revision === 6);
    expect([...r.core.endpoints.active()].map((e) => e.id)).toEqual(['b']);
  });

  it('keeps the live state of an endpoint that survives a snapshot; a removed one takes no new requests and finishes its own', async () => {
    const c = await controller();
    const [a, b, n] = [await upstream(), await upstream(), await upstream()];
    a.respond = a.hold;
    b.respond = b.hold;
    const r = await router(c);
    c.publish(protoSnapshot(1, [{ replicaId: 'a', model: 'm1', url: a.url }, { replicaId: 'b', model: 'm1', url: b.url }], ['m1']));
    await waitFor(() => r.core.endpoints.revision === 1);

    const pending = Array.from({ length: 4 }, () => postJson(`${r.url}/v1/chat/completions`, chat()));
    await waitFor(() => a.held.length + b.held.length === 4, { message: 'four requests held' });
    const stateA = r.core.endpoints.get('a');
    const stateB = r.core.endpoints.get('b');
    const inFlightBefore = [stateA?.inFlight, stateB?.inFlight];
    expect(inFlightBefore).toEqual([a.held.length, b.held.length]);

    // Another replica appears: a and b keep their objects — in-flight, breaker, drain rate, scrape.
    c.publish(protoSnapshot(2, [{ replicaId: 'a', model: 'm1', url: a.url }, { replicaId: 'b', model: 'm1', url: b.url }, { replicaId: 'n', model: 'm1', url: n.url }], ['m1']));
    await waitFor(() => r.core.endpoints.revision === 2);
    expect(r.core.endpoints.get('a')).toBe(stateA);
    expect(r.core.endpoints.get('b')).toBe(stateB);
    expect([r.core.endpoints.get('a')?.inFlight, r.core.endpoints.get('b')?.inFlight]).toEqual(inFlightBefore);
    const metrics = await (await fetch(`${r.url}/metrics`)).text();
    expect(sampleValue(metrics, 'llmgw_router_in_flight', { endpoint: 'a', model: 'm1' })).toBe(inFlightBefore[0]);

    // a and b go away: new requests go to n only, and what a and b hold still completes.
    c.publish(protoSnapshot(3, [{ replicaId: 'n', model: 'm1', url: n.url }], ['m1']));
    await waitFor(() => r.core.endpoints.revision === 3);
    for (let i = 0; i < 5; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect(n.hits).toBe(5);
    expect(a.hits + b.hits).toBe(4);
    a.releaseHeld();
    b.releaseHeld();
    for (const res of await Promise.all(pending)) expect(res.status).toBe(200);
    expect([stateA?.inFlight, stateB?.inFlight, stateA?.removed]).toEqual([0, 0, true]);
    expect(sampleValue(await (await fetch(`${r.url}/metrics`)).text(), 'llmgw_router_in_flight', { endpoint: 'a', model: 'm1' })).toBeUndefined();
  });

  it('after the controller restarts, the first snapshot of the new stream replaces everything, whatever its revision', async () => {
    const c = await controller();
    const [a, b] = [await upstream(), await upstream()];
    const r = await router(c);
    c.publish(protoSnapshot(10, [{ replicaId: 'a', model: 'm1', url: a.url }, { replicaId: 'b', model: 'm1', url: b.url }], ['m1', 'gone-model']));
    await waitFor(() => r.core.endpoints.revision === 10);

    const port = c.port;
    c.stop();
    const metrics = async (): Promise<string> => (await fetch(`${r.url}/metrics`)).text();
    await waitFor(async () => sampleValue(await metrics(), 'llmgw_router_watch_connected') === 0, { message: 'router saw the controller go' });
    // While the controller is away the router keeps serving what it knew.
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200);

    // The controller comes back knowing less, counting revisions from 1 again.
    const restarted = new FakeController();
    cleanups.push(() => restarted.stop());
    restarted.publish(protoSnapshot(1, [{ replicaId: 'b', model: 'm1', url: b.url }], ['m1']));
    await restarted.start(port);
    await waitFor(() => r.core.endpoints.revision === 1, { deadlineMs: 10_000, message: 'resynced from the restarted controller' });
    expect([...r.core.endpoints.active()].map((e) => e.id)).toEqual(['b']);
    expect(r.core.endpoints.catalog.resolve('gone-model')).toBeUndefined();
    const hitsA = a.hits;
    for (let i = 0; i < 6; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect(a.hits).toBe(hitsA);
    const text = await metrics();
    expect(sampleValue(text, 'llmgw_router_watch_reconnects_total')).toBeGreaterThanOrEqual(1);
    expect(sampleValue(text, 'llmgw_router_watch_connected')).toBe(1);
    expect(sampleValue(text, 'llmgw_router_endpoints', { model: 'm1' })).toBe(1);
  });

  it('reports replica → last used to the controller once a tick, leaving out replicas it has not used', async () => {
    const c = await controller();
    const [a, b] = [await upstream(), await upstream()];
    const r = await router(c, { LLMGW_ROUTER_USAGE_INTERVAL: '100ms' });
    c.publish(protoSnapshot(1, [{ replicaId: 'used', model: 'm1', url: a.url }, { replicaId: 'unused', model: 'm2', url: b.url }], ['m1', 'm2']));
    await waitFor(() => r.core.endpoints.revision === 1);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(c.usageReports).toEqual([]); // nothing used yet: nothing to say, and nothing reads as idle

    const t0 = Date.now();
    expect((await postJson(`${r.url}/v1/chat/completions`, chat('m1'))).status).toBe(200);
    const t1 = Date.now();
    const report = await waitFor(() => c.usageReports.at(-1), { message: 'a usage report' });
    expect(report.routerId).toBe('router-under-test');
    expect(Object.keys(report.lastUsedUnixMs)).toEqual(['used']);
    expect(report.lastUsedUnixMs['used']).toBeGreaterThanOrEqual(t0);
    expect(report.lastUsedUnixMs['used']).toBeLessThanOrEqual(t1);
  });
});

describe('usage without a controller', () => {
  it('goes to any UsageSink, not only gRPC', async () => {
    const u = await upstream();
    const reports: Map<string, number>[] = [];
    const sink: UsageSink = { report: async (m) => void reports.push(new Map(m)) };
    const file = writeRouterConfig(tempDir(), { models: [{ name: 'm1', engine: 'vllm' }], endpoints: [{ id: 'only', model: 'm1', url: u.url }] });
    const r = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: file, LLMGW_ROUTER_USAGE_INTERVAL: '50ms' }, { usageSink: sink });
    cleanups.push(() => r.close());
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    await waitFor(() => reports.length > 0);
    expect([...reports[0].keys()]).toEqual(['only']);
  });
});
