// A three-node fleet end to end over real gRPC: fake agents with 8×H100 each running real
// sim-engine processes, a router watching endpoints, one controller on SQLite. The steps share
// the fleet and run in order: place → lose a node → a lost node comes back → remove the model.
import { openStore, type Store } from '@llmgw/store';
import { sqliteBackend, stopAllSpawned, waitFor, type TestDatabase } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, TEST_JOIN_TOKEN, TEST_ROUTER_TOKEN, WatchingRouter, WITH_TOKENS, type TestController } from './test/controller.harness';

const STEP_MS = 90_000;

describe('a three-node fleet', () => {
  let db: TestDatabase;
  let store: Store;
  let controller: TestController;
  let router: WatchingRouter;
  let file: { path: string; cleanup(): void };
  const agents: FakeAgent[] = [];
  let firstRevision = 0;

  beforeAll(async () => {
    db = await sqliteBackend.create();
    file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
    controller = await startController({ ...WITH_TOKENS, LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path });
    store = await openStore(db.url);
    router = new WatchingRouter(controller.grpc, 'test-router', false, TEST_ROUTER_TOKEN);
    await waitFor(() => router.latest, { message: 'first snapshot', deadlineMs: 10_000 });
    firstRevision = router.latest?.revision ?? 0;
    for (const id of ['node-1', 'node-2', 'node-3']) {
      const agent = new FakeAgent({ nodeId: id, controllers: [controller.grpc], engines: 'sim', token: TEST_JOIN_TOKEN });
      agents.push(agent);
      agent.connect();
    }
  }, 60_000);

  afterAll(async () => {
    router?.close();
    await Promise.all(agents.map((a) => a.stop()));
    await controller?.close();
    await store?.close();
    await stopAllSpawned();
    await db?.drop();
    file?.cleanup();
  });

  it(
    'places a model wanting 2 replicas, both become ready, and the router stream carries both at a higher revision',
    async () => {
      const snapshot = await waitFor(() => (router.latest?.endpoints.length === 2 ? router.latest : undefined), {
        deadlineMs: 60_000,
        message: 'two endpoints in the router stream',
      });
      expect(snapshot.revision).toBeGreaterThan(firstRevision);
      expect(snapshot.catalog?.models.map((m) => m.name)).toEqual(['llama']);
      expect(new Set(snapshot.endpoints.map((e) => e.model))).toEqual(new Set(['llama']));
      // The URLs are real engines answering.
      for (const e of snapshot.endpoints) expect((await fetch(`${e.url}/health`)).status).toBe(200);
      const replicas = [...controller.plane.replicas.values()];
      expect(replicas.map((r) => r.replica.state)).toEqual(['ready', 'ready']);
      // Weights were fetched before the start on each node used.
      for (const agent of agents.filter((a) => a.running().length > 0)) {
        const kinds = agent.received.map((c) => c.payload.$case).filter((k) => k === 'fetchWeights' || k === 'startReplica');
        expect(kinds[0]).toBe('fetchWeights');
      }
      // The store catches up within a tick or two (state changes are written in batches).
      await waitFor(async () => (await store.replicas.list()).every((r) => r.state === 'ready' && r.members[0].port !== undefined), {
        deadlineMs: 5_000,
        message: 'ready replicas with ports in the store',
      });
      expect(await store.replicas.list()).toHaveLength(2);
    },
    STEP_MS,
  );

  it(
    'kill -9 of an agent and its engines: unreachable, then lost; replicas rebuilt on a survivor; the dead endpoints withdrawn',
    async () => {
      const victim = agents.find((a) => a.running().length > 0) as FakeAgent;
      const victimId = victim.options.nodeId;
      const deadUrls = router.latest?.endpoints.filter((e) => e.nodeId === victimId).map((e) => e.url) ?? [];
      expect(deadUrls.length).toBeGreaterThan(0);
      await victim.kill();

      await waitFor(() => controller.plane.nodes.get(victimId)?.info.state === 'unreachable', { deadlineMs: 10_000, message: 'node unreachable' });
      // While unreachable its endpoints are suspect, not withdrawn.
      await waitFor(() => router.latest?.endpoints.some((e) => e.nodeId === victimId && e.suspect), { deadlineMs: 5_000, message: 'suspect endpoints' });
      await waitFor(() => controller.plane.nodes.get(victimId)?.info.state === 'lost', { deadlineMs: 10_000, message: 'node lost' });

      const rebuilt = await waitFor(
        () => {
          const s = router.latest;
          return s && s.endpoints.length === 2 && s.endpoints.every((e) => e.nodeId !== victimId && !e.suspect) ? s : undefined;
        },
        { deadlineMs: 60_000, message: 'two endpoints on survivors' },
      );
      for (const url of deadUrls) expect(rebuilt.endpoints.map((e) => e.url)).not.toContain(url);
      for (const e of rebuilt.endpoints) expect((await fetch(`${e.url}/health`)).status).toBe(200);
      // No replica remains on the dead node, in memory or in the store.
      for (const r of controller.plane.replicas.values()) expect(r.replica.members.map((m) => m.nodeId)).not.toContain(victimId);
      await waitFor(async () => (await store.replicas.list()).every((r) => r.members.every((m) => m.nodeId !== victimId) && r.state === 'ready'), {
        deadlineMs: 10_000,
        message: 'store holds only survivors',
      });
      const events = await store.events.list({ nodeId: victimId });
      expect(events.map((e) => e.kind)).toContain('lost');
    },
    STEP_MS,
  );

  it(
    'a node cut off long enough to be lost comes back healthy, and its stale replicas are stopped rather than duplicated',
    async () => {
      const cut = agents.find((a) => a.running().length > 0) as FakeAgent;
      const cutId = cut.options.nodeId;
      const stale = cut.running();
      cut.partition();
      await waitFor(() => controller.plane.nodes.get(cutId)?.info.state === 'lost', { deadlineMs: 15_000, message: 'node lost' });
      await waitFor(() => router.latest?.endpoints.length === 2 && router.latest.endpoints.every((e) => e.nodeId !== cutId), {
        deadlineMs: 60_000,
        message: 'rebuilt elsewhere',
      });
      const since = Date.now();
      cut.heal();
      await waitFor(() => controller.plane.nodes.get(cutId)?.info.state === 'healthy', { deadlineMs: 10_000, message: 'healthy again' });
      await waitFor(() => cut.running().length === 0, { deadlineMs: 15_000, message: 'stale replicas stopped' });
      expect(cut.commands('stopReplica').filter((c) => c.at >= since).map((c) => (c.payload.$case === 'stopReplica' ? c.payload.value.replicaId : ''))).toEqual(
        expect.arrayContaining(stale),
      );
      expect(agents.reduce((n, a) => n + a.running().length, 0)).toBe(2);
      expect(controller.plane.replicas.size).toBe(2);
      expect(router.latest?.endpoints.every((e) => e.nodeId !== cutId)).toBe(true);
    },
    STEP_MS,
  );

  it(
    'removing the model from the catalog tears its replicas down and withdraws its endpoints',
    async () => {
      const survivors = agents.filter((a) => a.running().length > 0);
      expect(survivors.length).toBeGreaterThan(0);
      const current = await store.catalog.currentRevision();
      await store.catalog.put(catalogDoc([{ name: 'other', replicas: 0 }]), 'test', current);

      await waitFor(() => router.latest?.catalog?.models.map((m) => m.name).join() === 'other' && router.latest.endpoints.length === 0, {
        deadlineMs: 20_000,
        message: 'catalog without llama and no endpoints',
      });
      await waitFor(() => agents.every((a) => a.running().length === 0), { deadlineMs: 20_000, message: 'agents run nothing' });
      await waitFor(() => controller.plane.replicas.size === 0, { deadlineMs: 10_000, message: 'no replica records' });
      await waitFor(async () => (await store.replicas.list()).length === 0, { deadlineMs: 10_000, message: 'store empty' });
      const stops = survivors.flatMap((a) => a.commands('stopReplica'));
      expect(stops.length).toBeGreaterThanOrEqual(2);
      const evicted = await store.events.list({ model: 'llama' });
      expect(evicted.some((e) => e.kind === 'evicted' && e.reason === 'model is no longer in the catalog')).toBe(true);
    },
    STEP_MS,
  );
});
