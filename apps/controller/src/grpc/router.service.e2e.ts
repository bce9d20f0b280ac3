// RouterService.Watch over real gRPC against the in-process controller: a router that asks for
// compressed snapshots and one that does not (an older router) follow the same revisions and see
// the same endpoints, each in the form it asked for.
import { sqliteBackend, waitFor, type TestDatabase } from '@llmgw/testing';
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
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }, { name: 'qwen', replicas: 1 }]));
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

      const watching = controller.logs.filter((l) => l.msg === 'router watching').map((l) => [l.routerId, l.compressed]);
      expect(watching).toEqual(expect.arrayContaining([['new-router', true], ['old-router', false]]));
    },
    60_000,
  );
});
