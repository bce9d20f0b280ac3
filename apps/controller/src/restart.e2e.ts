// Controller restarts: agents reconnect, their replicas are adopted, and nothing is started or
// stopped while adoption settles (or after it, when everything was adopted); an operator's drain
// goes on under the restarted controller.
import { openStore } from '@llmgw/store';
import { freePort, sqliteBackend, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, TEST_JOIN_TOKEN, TEST_ROUTER_TOKEN, WatchingRouter, WITH_TOKENS, type TestController } from './test/controller.harness';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

/** An admin API call on loopback (no token configured), its body parsed. */
async function admin(controller: TestController, path: string, method: 'GET' | 'POST' = 'GET'): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${controller.http}/v1/admin${path}`, { method });
  return { status: res.status, body: JSON.parse(await res.text()) as Record<string, unknown> };
}

async function settleFleet(controller: TestController, agents: FakeAgent[], router: WatchingRouter, replicas: number): Promise<string[]> {
  await waitFor(() => router.latest?.endpoints.length === replicas && [...controller.plane.replicas.values()].every((r) => r.replica.state === 'ready'), {
    deadlineMs: 60_000,
    message: `${replicas} ready endpoints`,
  });
  // The store has the ready state and ports before the controller goes away.
  await waitFor(() => [...controller.plane.replicas.values()].every((r) => !r.dirty), { deadlineMs: 5_000, message: 'state flushed' });
  void agents;
  return router.urls();
}

describe('controller restart', () => {
  it(
    'agents reconnect, zero start or stop commands are sent during adoption, endpoints unchanged',
    async () => {
      const db = await sqliteBackend.create();
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
      cleanups.push(() => db.drop(), () => file.cleanup());
      const port = String(await freePort());
      const env = { LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_GRPC_PORT: port, LLMGW_CONTROLLER_SETTLE: '4s' };
      const first = await startController({ ...WITH_TOKENS, ...env });
      cleanups.push(() => first.close());
      const agents = ['node-1', 'node-2', 'node-3'].map((id) => new FakeAgent({ nodeId: id, controllers: [first.grpc], engines: 'sim', token: TEST_JOIN_TOKEN }));
      cleanups.push(() => Promise.all(agents.map((a) => a.stop())).then(() => undefined));
      for (const a of agents) a.connect();
      const router = new WatchingRouter(first.grpc, 'test-router', false, TEST_ROUTER_TOKEN);
      const before = await settleFleet(first, agents, router, 2);
      router.close();
      const placedReplicas = agents.flatMap((a) => a.running()).sort();

      await first.close();
      const restartedAt = Date.now();
      const second = await startController({ ...WITH_TOKENS, ...env });
      cleanups.push(() => second.close());
      const watcher = new WatchingRouter(second.grpc, 'test-router', false, TEST_ROUTER_TOKEN);
      cleanups.push(() => watcher.close());

      // A router's first snapshot from the new controller already carries the stored endpoints.
      const firstSnapshot = await waitFor(() => watcher.snapshots[0], { deadlineMs: 10_000, message: 'first snapshot from the restarted controller' });
      expect(firstSnapshot.endpoints.map((e) => e.url).sort()).toEqual(before);

      await waitFor(() => agents.every((a) => a.connectedTo === second.grpc && a.welcomes >= 2), { deadlineMs: 15_000, message: 'agents reconnected' });
      await waitFor(() => second.plane.phase === 'active', { deadlineMs: 15_000, message: 'adoption settled' });
      // Let several ticks and reconcile passes run after settling.
      const settledAt = Date.now();
      await waitFor(() => Date.now() - settledAt > 1_500, { deadlineMs: 3_000 });

      expect(agents.flatMap((a) => a.startsAndStopsSince(restartedAt))).toEqual([]);
      expect(second.plane.sessions.sent.startReplica + second.plane.sessions.sent.stopReplica).toBe(0);
      expect(agents.flatMap((a) => a.running()).sort()).toEqual(placedReplicas);
      expect(watcher.urls()).toEqual(before);
      expect([...second.plane.replicas.values()].map((r) => r.replica.state)).toEqual(['ready', 'ready']);
    },
    150_000,
  );

  it(
    'adopts replicas agents report that the store does not know, instead of starting new ones',
    async () => {
      const catalog = catalogDoc([{ name: 'llama', replicas: 2 }]);
      const first = await sqliteBackend.create();
      const file = catalogFile(catalog);
      cleanups.push(() => first.drop(), () => file.cleanup());
      const a = await startController({ ...WITH_TOKENS, LLMGW_DATABASE_URL: first.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path });
      cleanups.push(() => a.close());
      const agents = ['node-1', 'node-2'].map((id) => new FakeAgent({ nodeId: id, controllers: [a.grpc], token: TEST_JOIN_TOKEN }));
      cleanups.push(() => Promise.all(agents.map((x) => x.stop())).then(() => undefined));
      for (const x of agents) x.connect();
      await waitFor(() => agents.flatMap((x) => x.running()).length === 2, { deadlineMs: 20_000, message: 'two replicas running' });
      const running = agents.flatMap((x) => x.running()).sort();
      await a.close();

      // A new, empty store (its records lost): the agents' reports are all there is.
      const second = await sqliteBackend.create();
      cleanups.push(() => second.drop());
      const restartedAt = Date.now();
      const b = await startController({ ...WITH_TOKENS, LLMGW_DATABASE_URL: second.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '2s' });
      cleanups.push(() => b.close());
      for (const x of agents) x.options.controllers = [b.grpc];
      await waitFor(() => b.plane.phase === 'active' && b.plane.replicas.size === 2, { deadlineMs: 15_000, message: 'adopted and settled' });
      await waitFor(() => [...b.plane.replicas.values()].every((r) => r.persisted && !r.dirty), { deadlineMs: 5_000, message: 'adopted records stored' });
      const settledAt = Date.now();
      await waitFor(() => Date.now() - settledAt > 1_000, { deadlineMs: 2_000 });

      expect(agents.flatMap((x) => x.startsAndStopsSince(restartedAt))).toEqual([]);
      expect([...b.plane.replicas.snapshot().keys()].sort()).toEqual(running);
      const store = await openStore(second.url);
      try {
        expect((await store.replicas.list()).map((r) => r.id)).toEqual(running);
        expect((await store.events.list({ model: 'llama' })).filter((e) => e.kind === 'adopted')).toHaveLength(2);
      } finally {
        await store.close();
      }
    },
    90_000,
  );

  it(
    'a drain still under way when the controller restarts is carried on: the node stays draining and its replica moves off',
    async () => {
      const db = await sqliteBackend.create();
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
      cleanups.push(() => db.drop(), () => file.cleanup());
      const port = String(await freePort());
      const env = { LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_GRPC_PORT: port, LLMGW_CONTROLLER_SETTLE: '2s' };
      const first = await startController({ ...WITH_TOKENS, ...env });
      cleanups.push(() => first.close());
      const agents = ['node-1', 'node-2'].map((id) => new FakeAgent({ nodeId: id, controllers: [first.grpc], token: TEST_JOIN_TOKEN }));
      cleanups.push(() => Promise.all(agents.map((a) => a.stop())).then(() => undefined));
      for (const a of agents) a.connect();
      await waitFor(() => [...first.plane.replicas.values()].some((r) => r.replica.state === 'ready'), { deadlineMs: 20_000, message: 'a ready replica' });
      const [replica] = [...first.plane.replicas.values()].map((r) => r.replica);
      const holder = agents.find((a) => a.running().includes(replica.id)) as FakeAgent;
      const other = agents.find((a) => a !== holder) as FakeAgent;
      const holderId = holder.options.nodeId;
      const otherId = other.options.nodeId;

      // The only other node is cordoned, so the replica has nowhere to go: the drain is still
      // under way (the planner tried and found no room) when the controller stops.
      expect((await admin(first, `/nodes/${otherId}/cordon`, 'POST')).status).toBe(200);
      const drained = await admin(first, `/nodes/${holderId}/drain`, 'POST');
      expect(drained.body.node).toMatchObject({ id: holderId, cordoned: true, draining: true });
      await waitFor(() => first.plane.reconciler.unplaceable.get('llama'), { deadlineMs: 10_000, message: 'no room for the drained replica' });
      expect(holder.running()).toEqual([replica.id]);
      await first.close();

      const second = await startController({ ...WITH_TOKENS, ...env });
      cleanups.push(() => second.close());
      await waitFor(() => second.plane.phase === 'active', { deadlineMs: 15_000, message: 'adoption settled' });
      const { body } = await admin(second, '/nodes');
      expect(body.nodes).toEqual([
        expect.objectContaining({ id: 'node-1', cordoned: true, draining: holderId === 'node-1' }),
        expect.objectContaining({ id: 'node-2', cordoned: true, draining: holderId === 'node-2' }),
      ]);

      // Room again: the restarted controller moves the replica off the draining node.
      const uncordoned = await admin(second, `/nodes/${otherId}/uncordon`, 'POST');
      expect(uncordoned.body.node).toMatchObject({ id: otherId, cordoned: false, draining: false });
      await waitFor(
        () => {
          const all = [...second.plane.replicas.values()].map((r) => r.replica);
          return all.length === 1 && all[0].state === 'ready' && all[0].members[0].nodeId === otherId && holder.running().length === 0;
        },
        { deadlineMs: 20_000, message: 'replica moved off the draining node' },
      );
      expect(other.running()).toHaveLength(1);
      // Empty now, and still draining until an operator uncordons it.
      const after = ((await admin(second, '/nodes')).body.nodes as { id: string; cordoned: boolean; draining: boolean }[]).find((n) => n.id === holderId);
      expect(after).toMatchObject({ cordoned: true, draining: true });
      const events = (await admin(second, `/events?node=${holderId}`)).body.events as { kind: string; replicaId?: string }[];
      expect(events).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'evicted', replicaId: replica.id })]));
    },
    90_000,
  );
});
