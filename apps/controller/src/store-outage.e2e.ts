// PostgreSQL stopped for 20 s under a leading controller: nothing is evicted, routers keep the
// same endpoints, the leader keeps its claim (an unreachable store is no evidence that somebody
// else leads), and it carries on when the store returns.
import { createPostgresDatabase, startPostgres, waitFor, type PostgresServer } from '@llmgw/testing';
import { openStore } from '@llmgw/store';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, WatchingRouter } from './test/controller.harness';

const OUTAGE_MS = 20_000;
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('a store outage under the leader', () => {
  it(
    'PostgreSQL stopped for 20 s: no replica evicted, endpoints unchanged, the claim kept, work resumes after',
    async () => {
      const pg: PostgresServer = await startPostgres();
      cleanups.push(() => pg.close());
      const db = await createPostgresDatabase(pg.url);
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
      cleanups.push(() => file.cleanup());
      const controller = await startController({
        LLMGW_DATABASE_URL: db.url,
        LLMGW_CONTROLLER_CATALOG_FILE: file.path,
        LLMGW_CONTROLLER_LEASE: 'controller',
        // The claim outlives the outage: kept until ttl − 1 s skew without a successful renewal.
        LLMGW_CONTROLLER_LEASE_TTL: '30s',
        LLMGW_CONTROLLER_LEASE_RENEW: '1s',
        LLMGW_CONTROLLER_SETTLE: '1s',
        LLMGW_LOG_LEVEL: 'error',
      });
      cleanups.push(() => controller.close());
      const agents = ['node-1', 'node-2', 'node-3'].map((id) => new FakeAgent({ nodeId: id, controllers: [controller.grpc] }));
      cleanups.push(() => Promise.all(agents.map((a) => a.stop())));
      for (const a of agents) a.connect();
      const router = new WatchingRouter(controller.grpc);
      cleanups.push(() => router.close());
      await waitFor(() => router.latest?.endpoints.length === 2, { deadlineMs: 30_000, message: 'two endpoints' });
      await waitFor(() => [...controller.plane.replicas.values()].every((r) => !r.dirty), { deadlineMs: 5_000, message: 'state flushed' });
      const plane = controller.plane;
      const generation = plane.leadership.generation;
      expect(generation).toBeDefined();
      const endpoints = JSON.stringify(router.latest?.endpoints);
      const replicaIds = [...plane.replicas.snapshot().keys()].sort();
      const commandsBefore = agents.reduce((n, a) => n + a.received.length, 0);

      await pg.stop();
      const stoppedAt = Date.now();
      // Throughout the outage: still leading, same records, same endpoints, no command sent.
      const violations: string[] = [];
      await waitFor(
        () => {
          if (!plane.leadership.isLeader()) violations.push('stopped leading');
          if (plane.leadership.generation !== generation) violations.push(`generation ${plane.leadership.generation}`);
          const ids = [...plane.replicas.snapshot().keys()].sort();
          if (JSON.stringify(ids) !== JSON.stringify(replicaIds)) violations.push(`replicas ${ids.join(',')}`);
          const states = [...plane.replicas.values()].map((r) => r.replica.state);
          if (states.some((st) => st !== 'ready')) violations.push(`states ${states.join(',')}`);
          if (JSON.stringify(router.latest?.endpoints) !== endpoints) violations.push('endpoints changed');
          return Date.now() - stoppedAt >= OUTAGE_MS;
        },
        { deadlineMs: OUTAGE_MS + 5_000, intervalMs: 100, message: 'outage observed' },
      );
      expect(violations).toEqual([]);
      expect(agents.reduce((n, a) => n + a.received.length, 0)).toBe(commandsBefore);

      await pg.start();
      // The claim is renewed with the same generation: it was never given up.
      const store = await openStore(db.url);
      cleanups.push(() => store.close());
      await waitFor(
        async () => {
          const lease = await store.leases.get('controller');
          return lease?.held && lease.generation === generation && lease.owner === plane.leadership.ownerId && lease.expiresAt > Date.now() + 20_000;
        },
        { deadlineMs: 15_000, message: 'lease renewed by the same leader' },
      );
      expect(plane.leadership.isLeader()).toBe(true);
      // And it carries on: a catalog change is picked up and acted on.
      await store.catalog.put(catalogDoc([{ name: 'llama', replicas: 2 }, { name: 'qwen', replicas: 1 }]), 'test');
      await waitFor(() => router.latest?.endpoints.length === 3, { deadlineMs: 20_000, message: 'the new model placed after the outage' });
      expect(router.latest?.endpoints.filter((e) => e.model === 'llama').map((e) => e.replicaId).sort()).toEqual(replicaIds);
      await waitFor(async () => (await store.replicas.list()).length === 3, { deadlineMs: 10_000, message: 'store caught up' });
    },
    120_000,
  );
});
