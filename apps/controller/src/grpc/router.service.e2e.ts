// RouterService over real gRPC against the in-process controller: a router that asks for
// compressed snapshots and one that does not (an older router) follow the same revisions and see
// the same endpoints, each in the form it asked for; with a router token, a client without it
// can neither watch nor report usage, and a forged usage time in the future is clamped.
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { RouterServiceClient } from '@llmgw/proto';
import { sqliteBackend, testChannelCredentials, type TestDatabase, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from '../test/agent.fake';
import { catalogDoc, catalogFile, startController, WatchingRouter, type TestController } from '../test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('RouterService.Watch, compressed and plain', () => {
  it(
    'a watcher that asks for compression and one that does not get the same revisions and endpoints',
    async () => {
      const db: TestDatabase = await sqliteBackend.create();
      const doc = catalogDoc([{ name: 'llama', replicas: 2 }, { name: 'qwen', replicas: 1 }]);
      // A model's own deadlines travel to routers in the catalog view; qwen leaves them to the routers.
      Object.assign(doc.models[0] as object, { firstByteTimeout: '20s', stallTimeout: '5s' });
      const file = catalogFile(doc);
      cleanups.push(() => db.drop(), () => file.cleanup());
      const controller: TestController = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '200ms' });
      cleanups.push(() => controller.close());

      const compressed = new WatchingRouter(controller.grpc, 'new-router', true);
      const plain = new WatchingRouter(controller.grpc, 'old-router');
      cleanups.push(() => compressed.close(), () => plain.close());
      // Both hold the first snapshot before anything changes, so both see every later revision.
      await waitFor(() => compressed.latest !== undefined && plain.latest !== undefined && compressed.latest.revision === plain.latest.revision, {
        deadlineMs: 10_000,
        message: 'both watchers hold the first snapshot',
      });
      const from = compressed.latest?.revision ?? 0;

      const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'none' });
      cleanups.push(() => agent.stop());
      agent.connect();
      const done = (w: WatchingRouter): boolean => w.latest?.endpoints.length === 3;
      await waitFor(() => done(compressed) && done(plain), { deadlineMs: 30_000, message: 'three endpoints at both watchers' });
      await waitFor(() => compressed.latest?.revision === plain.latest?.revision, { deadlineMs: 5_000, message: 'both at the same revision' });

      // Each got the form it asked for, on every message.
      expect(new Set(compressed.forms)).toEqual(new Set(['compressed']));
      expect(new Set(plain.forms)).toEqual(new Set(['snapshot']));
      // The same revisions (more than the first: the endpoints arrived as changes) and contents.
      const revisions = (w: WatchingRouter): number[] => w.snapshots.map((s) => s.revision).filter((r) => r >= from);
      expect(revisions(compressed)).toEqual(revisions(plain));
      expect(revisions(compressed).length).toBeGreaterThan(1);
      expect(compressed.snapshots.filter((s) => s.revision >= from)).toEqual(plain.snapshots.filter((s) => s.revision >= from));
      expect(new Set(compressed.latest?.endpoints.map((e) => e.model))).toEqual(new Set(['llama', 'qwen']));
      expect(compressed.latest?.catalog?.models.map((m) => m.name).sort()).toEqual(['llama', 'qwen']);
      const deadlines = (w: WatchingRouter) => w.latest?.catalog?.models.map((m) => [m.name, m.firstByteTimeoutMs, m.stallTimeoutMs]).sort();
      expect(deadlines(compressed)).toEqual([
        ['llama', 20_000, 5_000],
        ['qwen', undefined, undefined],
      ]);
      expect(deadlines(plain)).toEqual(deadlines(compressed));

      const watching = controller.logs.filter((l) => l.msg === 'router watching').map((l) => [l.routerId, l.compressed]);
      expect(watching).toEqual(expect.arrayContaining([['new-router', true], ['old-router', false]]));
    },
    60_000,
  );
});

describe('RouterService with a router token', () => {
  it(
    'refuses Watch and ReportUsage without the token; clamps a forged usage time in the future to now and counts it',
    async () => {
      const token = 'router-token-for-this-test-0123';
      const db: TestDatabase = await sqliteBackend.create();
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
      cleanups.push(() => db.drop(), () => file.cleanup());
      const controller = await startController({
        LLMGW_DATABASE_URL: db.url,
        LLMGW_CONTROLLER_CATALOG_FILE: file.path,
        LLMGW_CONTROLLER_SETTLE: '200ms',
        LLMGW_CONTROLLER_JOIN_TOKEN: 'join-token-for-this-test-0123',
        LLMGW_CONTROLLER_ROUTER_TOKEN: token,
        LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
      });
      cleanups.push(() => controller.close());
      const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'none', token: 'join-token-for-this-test-0123' });
      cleanups.push(() => agent.stop());
      agent.connect();
      const router = new WatchingRouter(controller.grpc, 'real-router', true, token);
      cleanups.push(() => router.close());
      await waitFor(() => router.latest?.endpoints.length === 2, { deadlineMs: 30_000, message: 'two endpoints for the router with the token' });

      // Watch: no token, a wrong one: UNAUTHENTICATED, and not one snapshot.
      const anonymous = new WatchingRouter(controller.grpc, 'anonymous');
      const wrong = new WatchingRouter(controller.grpc, 'guesser', false, 'not-the-router-token-0123');
      cleanups.push(() => anonymous.close(), () => wrong.close());
      await waitFor(() => anonymous.lastStatus && wrong.lastStatus, { deadlineMs: 5_000, message: 'both refused' });
      for (const w of [anonymous, wrong]) {
        expect(w.lastStatus).toEqual({ code: status.UNAUTHENTICATED, details: expect.stringContaining('router token') });
        expect(w.snapshots).toEqual([]);
      }
      expect(controller.logs.filter((l) => l.msg === 'router watching').map((l) => l.routerId)).toEqual(['real-router']);

      // ReportUsage: the forged year-2100 time, without the token: refused, nothing recorded.
      const [a, b] = router.latest!.endpoints.map((e) => e.replicaId).sort();
      const client = new RouterServiceClient(controller.grpc, testChannelCredentials());
      cleanups.push(() => client.close());
      const report = (lastUsedUnixMs: Record<string, number>, bearer?: string): Promise<ServiceError | null> => {
        const md = new Metadata();
        if (bearer !== undefined) md.set('authorization', `Bearer ${bearer}`);
        return new Promise((resolve) => client.reportUsage({ keyUsage: [], routerId: 'forger', lastUsedUnixMs }, md, { deadline: Date.now() + 5_000 }, (error) => resolve(error)));
      };
      const YEAR_2100 = 4_102_444_800_000;
      expect(await report({ [a]: YEAR_2100 })).toMatchObject({ code: status.UNAUTHENTICATED });
      expect(await report({ [a]: YEAR_2100 }, 'not-the-router-token-0123')).toMatchObject({ code: status.UNAUTHENTICATED });
      expect(controller.plane.replicas.get(a)?.replica.lastUsedAt).toBeUndefined();

      // With the token: a time in the future is clamped to now; one an hour ago is kept as it is.
      const before = Date.now();
      const hourAgo = before - 3_600_000;
      expect(await report({ [a]: YEAR_2100, [b]: hourAgo }, token)).toBeNull();
      const after = Date.now();
      const clamped = controller.plane.replicas.get(a)?.replica.lastUsedAt;
      expect(clamped).toBeGreaterThanOrEqual(before);
      expect(clamped).toBeLessThanOrEqual(after);
      expect(controller.plane.replicas.get(b)?.replica.lastUsedAt).toBe(hourAgo);
      const metrics = await (await fetch(`${controller.http}/metrics`)).text();
      expect(metrics).toMatch(/^llmgw_controller_usage_future_clamped_total 1$/m);
      expect(controller.logs.some((l) => l.msg === 'router reported usage times in the future; clamped to now' && l.routerId === 'forger' && l.clamped === 1)).toBe(true);
    },
    60_000,
  );
});
