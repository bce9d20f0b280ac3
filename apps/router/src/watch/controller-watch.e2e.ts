// The router following a controller over the real RouterService gRPC contract: readiness
// waits for the first snapshot, older revisions are ignored, endpoints that survive an update
// keep their live state, a removed one finishes what it has, a controller restart resyncs
// everything, usage goes back once a tick, compressed snapshots are asked for and applied (a
// stale one skipped unread), and an unreadable one drops the stream without harming the router.
import { Writable } from 'node:stream';
import { deflateRawSync } from 'node:zlib';
import { createLogger } from '@llmgw/observability';
import { EndpointSnapshot, RouterServiceClient, type WatchResponse } from '@llmgw/proto';
import { FakeClock, SeededRng, testChannelCredentials, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { EndpointRegistry } from '../endpoints/endpoint.registry';
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
import { ControllerWatch, WATCH_MAX_MESSAGE_BYTES } from './controller.watch';

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

/** `snapshot` as the controller sends it to a router that accepts compression. */
function compressed(snapshot: EndpointSnapshot): WatchResponse {
  return { compressed: { revision: snapshot.revision, deflate: deflateRawSync(EndpointSnapshot.encode(snapshot).finish()) } };
}

/** Writes `message` as is to every open watch stream of `c`. */
function sendRaw(c: FakeController, message: WatchResponse): void {
  for (const w of c.watchers) w.write(message);
}

/** Compressed messages no router can read, by what is wrong with them (all at revision 6). */
const UNREADABLE: [string, WatchResponse, RegExp][] = [
  ['not DEFLATE at all', { compressed: { revision: 6, deflate: Buffer.from('plainly not deflate') } }, /does not inflate/],
  [
    'a decompression bomb',
    { compressed: { revision: 6, deflate: deflateRawSync(Buffer.alloc(WATCH_MAX_MESSAGE_BYTES + 1)) } },
    new RegExp(`inflates to more than ${WATCH_MAX_MESSAGE_BYTES} bytes`),
  ],
  ['DEFLATE of bytes that are no EndpointSnapshot', { compressed: { revision: 6, deflate: deflateRawSync(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f])) } }, /does not decode/],
  [
    'a revision that disagrees with the one inside',
    { compressed: { revision: 6, deflate: deflateRawSync(EndpointSnapshot.encode({ revision: 9, endpoints: [], catalog: undefined }).finish()) } },
    /carries revision 9 inside/,
  ],
];

describe('watching the controller', () => {
  it('is not ready until the first snapshot, then serves it', async () => {
    const c = await controller();
    const u = await upstream();
    const r = await router(c);
    await waitFor(() => c.watchers.size === 1, { message: 'router watching' });

    const before = await fetch(`${r.url}/readyz`);
    expect(before.status).toBe(503);
    expect(await before.json()).toEqual({
      status: 'not_ready',
      checks: {
        'routing-table': { ready: false, reason: 'no endpoint snapshot from the controller yet' },
        // No table yet, so nothing is stale: the age is left out, not 0.
        controller: { ready: true, detail: { connected: false, controller: c.address } },
        // How the watch is secured: TLS, trusting the test CA.
        grpc: { ready: true, detail: { security: 'tls' } },
      },
    });
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

  it('several controllers: follows a standby\'s NotLeader to the leader, serves stale but live while none answers, and resyncs on the next leader with no ghosts', async () => {
    const [standby, leader] = [await controller(), await controller()];
    standby.notLeader = { leaderAddress: leader.address };
    const [a, b, n] = [await upstream(), await upstream(), await upstream()];
    leader.publish(protoSnapshot(7, [{ replicaId: 'a', model: 'm1', url: a.url }, { replicaId: 'b', model: 'm1', url: b.url }], ['m1', 'gone-model']));
    const r = await router(standby, { LLMGW_ROUTER_CONTROLLER: `${standby.address},${leader.address}`, LLMGW_ROUTER_USAGE_INTERVAL: '100ms' });
    await waitFor(() => r.core.endpoints.revision === 7, { deadlineMs: 10_000, message: 'snapshot from the leader the standby named' });
    expect(standby.watchCalls).toBe(1);
    const metrics = async (): Promise<string> => (await fetch(`${r.url}/metrics`)).text();
    const controllerCheck = async (): Promise<{ status: number; detail: Record<string, unknown> }> => {
      const res = await fetch(`${r.url}/readyz`);
      const body = (await res.json()) as { checks: Record<string, { detail: Record<string, unknown> }> };
      return { status: res.status, detail: body.checks['controller'].detail };
    };
    expect(await controllerCheck()).toEqual({ status: 200, detail: { connected: true, controller: leader.address, staleSeconds: 0 } });
    expect(sampleValue(await metrics(), 'llmgw_router_watch_not_leader_total')).toBe(1);
    expect(sampleValue(await metrics(), 'llmgw_router_snapshot_stale_seconds')).toBe(0);
    // Usage goes to the controller the watch follows.
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    await waitFor(() => leader.usageReports.length > 0, { message: 'usage reported to the leader' });
    expect(standby.usageReports).toEqual([]);

    // The leader dies and the standby knows no leader yet: the router keeps serving what it knew.
    leader.stop();
    standby.notLeader = {};
    await waitFor(async () => (await controllerCheck()).detail.connected === false, { message: 'router saw the leader go' });
    await waitFor(async () => (sampleValue(await metrics(), 'llmgw_router_snapshot_stale_seconds') ?? 0) > 0.2, { message: 'the table ages' });
    const stale = await controllerCheck();
    expect(stale.status).toBe(200);
    expect(stale.detail.staleSeconds).toBeGreaterThan(0);
    for (let i = 0; i < 4; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    const asked = standby.watchCalls;
    await waitFor(() => standby.watchCalls >= asked + 3, { message: 'the router keeps asking the standby' });

    // The standby takes over, knowing a different replica set: the router resyncs to exactly it.
    standby.publish(protoSnapshot(1, [{ replicaId: 'n', model: 'm1', url: n.url }], ['m1']));
    standby.notLeader = undefined;
    await waitFor(() => r.core.endpoints.revision === 1, { deadlineMs: 10_000, message: 'resynced from the new leader' });
    expect([...r.core.endpoints.active()].map((e) => e.id)).toEqual(['n']);
    expect(r.core.endpoints.catalog.resolve('gone-model')).toBeUndefined();
    const [hitsA, hitsB] = [a.hits, b.hits];
    for (let i = 0; i < 4; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect([a.hits, b.hits, n.hits]).toEqual([hitsA, hitsB, 4]);
    expect(await controllerCheck()).toEqual({ status: 200, detail: { connected: true, controller: standby.address, staleSeconds: 0 } });
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

describe('compressed snapshots', () => {
  it('the router asks for them, applies them, and skips a stale one by its revision without inflating it', async () => {
    const c = await controller();
    const [a, b] = [await upstream(), await upstream()];
    const r = await router(c);
    await waitFor(() => c.watchers.size === 1, { message: 'router watching' });
    expect([...c.watchers][0].request).toEqual({ routerId: 'router-under-test', acceptCompressed: true });

    sendRaw(c, compressed(protoSnapshot(5, [{ replicaId: 'a', model: 'm1', url: a.url }], [{ name: 'm1', aliases: ['first'] }])));
    await waitFor(async () => (await fetch(`${r.url}/readyz`)).status === 200, { message: 'ready from a compressed snapshot' });
    expect(r.core.endpoints.revision).toBe(5);
    expect((await postJson(`${r.url}/v1/chat/completions`, chat('first'))).status).toBe(200);
    expect(a.hits).toBe(1);

    // Older or equal revisions are stale: never inflated, so even garbage bytes are merely skipped.
    sendRaw(c, { compressed: { revision: 4, deflate: Buffer.from('garbage') } });
    sendRaw(c, { compressed: { revision: 5, deflate: Buffer.from('garbage') } });
    const text = async (): Promise<string> => (await fetch(`${r.url}/metrics`)).text();
    await waitFor(async () => sampleValue(await text(), 'llmgw_router_watch_snapshots_total', { result: 'stale' }) === 2, { message: 'two stale snapshots seen' });
    sendRaw(c, compressed(protoSnapshot(6, [{ replicaId: 'b', model: 'm1', url: b.url }], ['m1'])));
    await waitFor(() => r.core.endpoints.revision === 6);
    expect([...r.core.endpoints.active()].map((e) => e.id)).toEqual(['b']);
    const after = await text();
    expect(sampleValue(after, 'llmgw_router_watch_snapshots_total', { result: 'applied' })).toBe(2);
    expect(sampleValue(after, 'llmgw_router_watch_snapshots_total', { result: 'invalid' })).toBeUndefined();
    expect(c.watchCalls).toBe(1);
  });

  it('one that does not inflate leaves the router serving; it reconnects, and the new stream resyncs whatever its revision', async () => {
    const c = await controller();
    const [a, b] = [await upstream(), await upstream()];
    const r = await router(c);
    await waitFor(() => c.watchers.size === 1, { message: 'router watching' });
    sendRaw(c, compressed(protoSnapshot(5, [{ replicaId: 'a', model: 'm1', url: a.url }], ['m1', 'gone-model'])));
    await waitFor(() => r.core.endpoints.revision === 5);

    sendRaw(c, UNREADABLE[0][1]);
    const text = async (): Promise<string> => (await fetch(`${r.url}/metrics`)).text();
    await waitFor(async () => sampleValue(await text(), 'llmgw_router_watch_snapshots_total', { result: 'invalid' }) === 1, { message: 'counted invalid' });
    // Still routing with what it knew.
    expect(r.core.endpoints.revision).toBe(5);
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect(a.hits).toBe(1);

    // A fresh stream; its first snapshot replaces everything although its revision is lower.
    await waitFor(() => c.watchCalls === 2 && c.watchers.size === 1, { message: 'reconnected' });
    sendRaw(c, compressed(protoSnapshot(1, [{ replicaId: 'b', model: 'm1', url: b.url }], ['m1'])));
    await waitFor(() => r.core.endpoints.revision === 1, { message: 'resynced' });
    expect([...r.core.endpoints.active()].map((e) => e.id)).toEqual(['b']);
    expect(r.core.endpoints.catalog.resolve('gone-model')).toBeUndefined();
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect(b.hits).toBe(1);
    // One stream dropped, one reopened, and the new one stays: no reconnect loop. A longer wait
    // than the largest backoff step (200 ms) would show one. The reconnect counter counts every
    // attempt, also one that fails in the transport before reaching the controller (seen on a
    // loaded CI machine: 11 attempts for 2 calls), so the controller's count is the one asserted.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect([c.watchCalls, c.watchers.size]).toEqual([2, 1]);
    const after = await text();
    expect(sampleValue(after, 'llmgw_router_watch_reconnects_total')).toBeGreaterThanOrEqual(1);
    expect(sampleValue(after, 'llmgw_router_watch_connected')).toBe(1);
  });

  it.each(UNREADABLE)('%s: logged with its revision and the problem, counted, and the stream reopened', async (_name, message, problem) => {
    const c = await controller();
    const u = await upstream();
    const logs: Record<string, unknown>[] = [];
    const destination = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) logs.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const client = new RouterServiceClient(c.address, testChannelCredentials());
    const registry = new EndpointRegistry({ clock: new FakeClock(), breaker: { failureThreshold: 2, cooldownMs: 1_000 }, scrapeStaleAfterMs: 3_000, scrapeUnavailableAfter: 3 });
    let invalid = 0;
    let reconnects = 0;
    const watch = new ControllerWatch(
      () => client,
      registry,
      { addresses: [c.address], routerId: 'w', backoffMinMs: 20, backoffMaxMs: 200, rng: new SeededRng(7), clock: new FakeClock() },
      createLogger({ name: 'test', level: 'info', destination }),
      { invalid: () => invalid++, reconnect: () => reconnects++ },
    );
    watch.start();
    cleanups.push(() => {
      watch.stop();
      client.close();
    });
    await waitFor(() => c.watchers.size === 1, { message: 'watching' });
    sendRaw(c, compressed(protoSnapshot(5, [{ replicaId: 'a', model: 'm1', url: u.url }], ['m1'])));
    await waitFor(() => registry.revision === 5);

    sendRaw(c, message);
    const error = await waitFor(() => logs.find((l) => l.level === 'error'), { message: 'an error logged' });
    expect(error).toMatchObject({ revision: 6, msg: 'compressed endpoint snapshot is unreadable; dropping the stream' });
    expect(String(error.error)).toMatch(problem);
    expect(invalid).toBe(1);
    expect(registry.revision).toBe(5);
    // Generous deadlines: on a loaded CI machine the dropped stream's end and the reconnect each
    // take a few event-loop turns of two processes (a 5 s default was once missed under load).
    // Reconnect attempts that fail in the transport before reaching the controller count too
    // (11 attempts for 2 calls once on CI), so the controller's count is the exact one.
    await waitFor(() => reconnects >= 1 && c.watchCalls === 2 && c.watchers.size === 1, { message: 'reopened', deadlineMs: 20_000 });
    sendRaw(c, compressed(protoSnapshot(2, [], ['m1'])));
    await waitFor(() => registry.revision === 2 && watch.connected, { message: 'resynced', deadlineMs: 20_000 });
    expect(registry.size).toBe(0);
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
