// Replicas that keep failing and models that fit nowhere: retried with backoff, never in a hot
// loop, with reasons an operator can read.
import { sqliteBackend, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function fleet(doc: unknown, env: Record<string, string>, agents: ConstructorParameters<typeof FakeAgent>[0][]) {
  const db = await sqliteBackend.create();
  const file = catalogFile(doc);
  cleanups.push(() => db.drop(), () => file.cleanup());
  const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '300ms', ...env });
  cleanups.push(() => controller.close());
  const fakes = agents.map((o) => new FakeAgent({ ...o, controllers: [controller.grpc] }));
  cleanups.push(() => Promise.all(fakes.map((a) => a.stop())));
  for (const a of fakes) a.connect();
  return { controller, agents: fakes };
}

describe('failures', () => {
  it(
    'a replica that keeps failing is restarted in place with backoff, then moved to another node',
    async () => {
      const { controller, agents } = await fleet(catalogDoc([{ name: 'llama', replicas: 1 }]), { LLMGW_CONTROLLER_MAX_RESTARTS: '1' }, [
        { nodeId: 'node-1', controllers: [], crashEngines: true },
      ]);
      const [bad] = agents;
      await waitFor(() => bad.commands('startReplica').length >= 1, { deadlineMs: 10_000, message: 'first start on node-1' });
      // A second node joins only now, so the first placement had nowhere else to go.
      const good = new FakeAgent({ nodeId: 'node-2', controllers: [controller.grpc] });
      cleanups.push(() => good.stop());
      good.connect();
      await waitFor(() => good.running().length === 1 && [...controller.plane.replicas.values()].some((r) => r.replica.state === 'ready'), {
        deadlineMs: 20_000,
        message: 'moved to node-2 and ready',
      });
      const starts = bad.commands('startReplica');
      expect(starts).toHaveLength(2); // the first start and one restart in place
      expect(new Set(starts.map((c) => (c.payload.$case === 'startReplica' ? c.payload.value.replicaId : ''))).size).toBe(1);
      // Backoff: the restart waits 500 ms after the failure, the move twice that after the next.
      expect(starts[1].at - starts[0].at).toBeGreaterThanOrEqual(500);
      const stops = bad.commands('stopReplica');
      expect(stops).toHaveLength(1);
      expect(stops[0].at - starts[1].at).toBeGreaterThanOrEqual(1_000);
      const { events: log } = JSON.parse(await (await fetch(`${controller.http}/v1/admin/events?model=llama`)).text()) as { events: { kind: string; reason?: string }[] };
      const kinds = log.map((e) => e.kind).reverse();
      expect(kinds).toEqual(expect.arrayContaining(['placed', 'failed', 'evicted']));
      expect(log.find((e) => e.kind === 'evicted')?.reason).toMatch(/^failed 2 times \(engine exited with status 1\); moving it$/);
    },
    60_000,
  );

  it(
    'a start the agent refuses is recorded as refused, fails the replica, and is retried after a backoff',
    async () => {
      const { controller, agents } = await fleet(catalogDoc([{ name: 'llama', replicas: 1 }]), {}, [{ nodeId: 'node-1', controllers: [], refuseStarts: true }]);
      await waitFor(() => agents[0].commands('startReplica').length >= 2, { deadlineMs: 15_000, message: 'retried' });
      const starts = agents[0].commands('startReplica');
      expect(starts[1].at - starts[0].at).toBeGreaterThanOrEqual(500);
      const { events } = JSON.parse(await (await fetch(`${controller.http}/v1/admin/events?model=llama`)).text()) as { events: { kind: string; reason?: string }[] };
      expect(events.find((e) => e.kind === 'refused')?.reason).toBe('start refused by the agent: GPU 0 is held by another process');
      expect(events.some((e) => e.kind === 'failed')).toBe(true);
    },
    60_000,
  );

  it(
    'a model that fits nowhere is reported unplaceable with reasons and retried with backoff, not in a loop; a node that fits ends it',
    async () => {
      const doc = { models: [{ name: 'huge', source: 'hf://org/huge@main', size: '1GB', replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'B200-192GB' }] }] };
      const { controller } = await fleet(doc, { LLMGW_CONTROLLER_BACKOFF_MIN: '400ms', LLMGW_CONTROLLER_BACKOFF_MAX: '10s' }, [{ nodeId: 'node-1', controllers: [] }]);
      await waitFor(() => controller.plane.reconciler.unplaceable.get('huge'), { deadlineMs: 10_000, message: 'unplaceable' });
      const watchedFrom = Date.now();
      await waitFor(() => Date.now() - watchedFrom > 3_000, { deadlineMs: 4_000 });
      const state = controller.plane.reconciler.unplaceable.get('huge');
      // 400 + 800 + 1600 ms: at most four tries in three seconds (a tick-rate loop would be ~15).
      expect(state?.attempts).toBeLessThanOrEqual(4);
      expect(state?.summary).toContain('B200-192GB');
      const status = JSON.parse(await (await fetch(`${controller.http}/v1/admin/status`)).text());
      expect(status.unplaceable).toEqual([expect.objectContaining({ model: 'huge', reasons: expect.arrayContaining([expect.objectContaining({ profileIndex: 0 })]) })]);
      const metrics = await (await fetch(`${controller.http}/metrics`)).text();
      expect(metrics).toMatch(/^llmgw_cluster_model_unplaceable\{model="huge"\} 1$/m);
      const { events } = JSON.parse(await (await fetch(`${controller.http}/v1/admin/events?model=huge`)).text()) as { events: { kind: string }[] };
      expect(events.filter((e) => e.kind === 'unplaceable')).toHaveLength(1);

      // A node with the right GPUs joins: capacity changed, so it is tried at once and placed.
      const b200 = new FakeAgent({ nodeId: 'node-b', controllers: [controller.grpc], gpuClass: 'B200-192GB' });
      cleanups.push(() => b200.stop());
      b200.connect();
      await waitFor(() => b200.running().length === 1 && !controller.plane.reconciler.unplaceable.has('huge'), { deadlineMs: 5_000, message: 'placed on the new node' });
    },
    60_000,
  );
});
