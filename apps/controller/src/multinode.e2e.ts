// A 2-node vLLM replica through the real controller and two real llmgw-agent processes (fake
// GPUs, one fabric), with fake `ray` and `vllm` executables on PATH standing in for Ray and vLLM
// (see test/fake-ray.harness.ts; `vllm serve` runs the engine simulator). Placement on both
// nodes, the argv on each member, restart in place after the engine is killed, and teardown.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@llmgw/store';
import { inheritedTestEnv, processExists, runTsEntry, spawnProcess, sqliteBackend, stopAllSpawned, waitFor, type SpawnedProcess } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeRayNode, type FakeCall } from './test/fake-ray.harness';
import { catalogFile, startController, WatchingRouter } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
const enginePids = new Set<number>();
const fakes: FakeRayNode[] = [];
const roots: string[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
  // Engines and Ray daemons deliberately outlive their agent: end any a failed assertion left
  // behind, by id, then remove their folders.
  for (const pid of enginePids) if (processExists(pid)) process.kill(-pid, 'SIGKILL');
  for (const f of fakes) f.killAll();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function startAgent(fake: FakeRayNode, controller: string, root: string): Promise<SpawnedProcess> {
  const home = join(root, fake.nodeId);
  const env = inheritedTestEnv(['HF_', 'RAY_']);
  return spawnProcess({
    ...runTsEntry('apps/agent/src/main.ts'),
    name: `llmgw-agent ${fake.nodeId}`,
    cleanEnv: true,
    env: {
      ...env,
      PATH: `${fake.binDir}:${process.env['PATH'] ?? ''}`,
      LLMGW_DATA_DIR: join(home, 'data'),
      LLMGW_AGENT_PORT: '0',
      LLMGW_AGENT_NODE_ID: fake.nodeId,
      LLMGW_AGENT_CACHE_DIR: join(home, 'cache'),
      LLMGW_AGENT_CONTROLLERS: controller,
      LLMGW_AGENT_FAKE_GPUS: '8xH100-80GB',
      LLMGW_AGENT_FABRIC: 'ib-east',
      LLMGW_AGENT_SOURCE_DIRS: root,
      LLMGW_AGENT_ADVERTISE_ADDRESS: '127.0.0.1',
      LLMGW_AGENT_RECONNECT_MIN: '100ms',
      LLMGW_AGENT_RECONNECT_MAX: '1s',
      LLMGW_AGENT_READY_TIMEOUT: '60s',
      LLMGW_AGENT_RESTART_BACKOFF: '200ms',
      LLMGW_AGENT_STOP_GRACE: '5s',
    },
    readyWhen: { stdoutMatch: /llmgw-agent listening on http:\/\/127\.0\.0\.1:(\d+)/ },
    deadlineMs: 60_000,
  });
}

/** True when nothing listens on `port` at 127.0.0.1 (it can be bound). */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

const argvOf = (calls: readonly FakeCall[], cmd: FakeCall['cmd'], first: string): string[][] =>
  calls.filter((c) => c.cmd === cmd && c.argv[0] === first).map((c) => [...c.argv]);

/**
 * A controller serving a catalog of one model `big` on `profile` with `replicas` replicas, a
 * watching router, and agents node-a and node-b (one fabric) with their fake Ray and vLLM.
 */
async function startCluster(profile: Record<string, unknown>, replicas: number) {
  const root = mkdtempSync(join(tmpdir(), 'llmgw-multinode-'));
  roots.push(root);
  const weights = join(root, 'big.safetensors');
  writeFileSync(weights, 'not really weights: the simulator does not read them');
  const doc = { models: [{ name: 'big', source: `file://${weights}`, size: '1MB', replicas, profiles: [profile] }] };
  const db = await sqliteBackend.create();
  const file = catalogFile(doc);
  cleanups.push(() => db.drop(), () => file.cleanup());
  const controller = await startController({
    LLMGW_DATABASE_URL: db.url,
    LLMGW_CONTROLLER_CATALOG_FILE: file.path,
    LLMGW_CONTROLLER_SETTLE: '1s',
    LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '300ms',
    LLMGW_CONTROLLER_UNREACHABLE_AFTER: '3s',
    LLMGW_CONTROLLER_LOST_AFTER: '10s',
  });
  cleanups.push(() => controller.close());
  const router = new WatchingRouter(controller.grpc);
  cleanups.push(() => router.close());
  const nodes = ['node-a', 'node-b'].map((id) => new FakeRayNode(root, id));
  fakes.push(...nodes);
  const agents = await Promise.all(nodes.map((n) => startAgent(n, controller.grpc, root)));
  cleanups.push(() => Promise.all(agents.map((a) => a.stop())));
  const fakeOf = (nodeId: string): FakeRayNode => nodes.find((n) => n.nodeId === nodeId) as FakeRayNode;
  /** Removes the model from the catalog and waits until neither agent runs anything. */
  const removeModel = async (): Promise<void> => {
    const store = await openStore(db.url);
    cleanups.push(() => store.close());
    await store.catalog.put({ models: [] }, 'test');
    await waitFor(() => router.latest?.endpoints.length === 0 && controller.plane.replicas.size === 0, { deadlineMs: 30_000, message: 'withdrawn and forgotten' });
    for (const n of nodes) {
      await waitFor(() => (controller.plane.nodes.get(n.nodeId)?.reported.size === 0 ? true : undefined), { deadlineMs: 30_000, message: `${n.nodeId} runs nothing` });
    }
  };
  return { weights, controller, router, nodes, fakeOf, removeModel };
}

describe('a multi-node vLLM replica with real agent processes', () => {
  it(
    'places on two nodes of one fabric, rendezvouses on a port rank 0 picked, restarts in place and tears Ray down on every member',
    async () => {
      const profile = { engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 8, nodes: 2, tensorParallel: 8, pipelineParallel: 2 };
      const { weights, controller, router, nodes, fakeOf, removeModel } = await startCluster(profile, 1);

      // 1. One replica on both nodes of the fabric, ready and published.
      const published = await waitFor(() => (router.latest?.endpoints.length === 1 ? router.latest : undefined), { deadlineMs: 120_000, message: 'the replica is published' });
      const endpoint = published.endpoints[0];
      const entry = controller.plane.replicas.get(endpoint.replicaId);
      const members = [...(entry?.replica.members ?? [])].sort((x, y) => x.rank - y.rank);
      expect(members.map((m) => m.nodeId).sort()).toEqual(['node-a', 'node-b']);
      for (const m of members) expect(controller.plane.nodes.get(m.nodeId)?.info.fabric).toBe('ib-east');
      const [leader, worker] = members;
      const rendezvous = leader.rendezvousPort as number;
      expect(rendezvous).toBeGreaterThan(0);
      expect(rendezvous).not.toBe(6379);
      expect(rendezvous).not.toBe(leader.port);
      expect(worker.rendezvousPort).toBeUndefined();
      expect((await fetch(`${endpoint.url}/v1/models`)).status).toBe(200);
      const pidOf = (nodeId: string): number | undefined => controller.plane.nodes.get(nodeId)?.reported.get(endpoint.replicaId)?.pid;
      for (const m of members) if (pidOf(m.nodeId) !== undefined) enginePids.add(pidOf(m.nodeId) as number);

      // 2. The argv on each member: a Ray head on the picked port, vLLM with the ray backend and
      //    the parallel sizes, the worker joining the head.
      const lead = fakeOf(leader.nodeId);
      const work = fakeOf(worker.nodeId);
      const address = `127.0.0.1:${rendezvous}`;
      expect(argvOf(lead.calls(), 'ray', 'start')).toEqual([['start', '--head', `--port=${rendezvous}`, '--num-gpus=8', '--disable-usage-stats']]);
      const serves = lead.calls().filter((c) => c.cmd === 'vllm');
      expect(serves).toHaveLength(1);
      expect(serves[0].rayAddress).toBe(address);
      const serve = serves[0].argv;
      expect(serve.slice(0, 2)).toEqual(['serve', weights]);
      expect(serve.join(' ')).toContain(`--port ${leader.port}`);
      expect(serve.join(' ')).toContain('--tensor-parallel-size 8 --pipeline-parallel-size 2');
      expect(serve.join(' ')).toContain('--distributed-executor-backend ray');
      expect(work.calls().filter((c) => c.cmd === 'vllm')).toEqual([]);
      expect(argvOf(work.calls(), 'ray', 'start')).toEqual([['start', `--address=${address}`, '--num-gpus=8', '--disable-usage-stats', '--block']]);

      // 3. Restart in place: the engine is killed; it comes back on the same nodes, the Ray head
      //    stopped first and started again on the same port (no collision with the old one).
      const enginePid = pidOf(leader.nodeId) as number;
      process.kill(-enginePid, 'SIGKILL');
      await waitFor(() => argvOf(lead.calls(), 'ray', 'start').length === 2 && lead.calls().filter((c) => c.cmd === 'vllm').length === 2, {
        deadlineMs: 60_000,
        message: 'the Ray head and vLLM started again on rank 0',
      });
      const back = await waitFor(
        () => {
          const e = router.latest?.endpoints[0];
          const pid = pidOf(leader.nodeId);
          return e && e.replicaId === endpoint.replicaId && pid !== undefined && pid !== enginePid && controller.plane.replicas.get(e.replicaId)?.replica.state === 'ready' ? e : undefined;
        },
        { deadlineMs: 90_000, message: 'the replica ready again' },
      );
      enginePids.add(pidOf(leader.nodeId) as number);
      expect((await fetch(`${back.url}/v1/models`)).status).toBe(200);
      expect(controller.plane.replicas.get(endpoint.replicaId)?.replica.members.map((m) => m.nodeId).sort()).toEqual(['node-a', 'node-b']);
      const leadRay = lead.calls().filter((c) => c.cmd === 'ray').map((c) => c.argv[0] + (c.argv.includes('--head') ? ' --head' : ''));
      expect(leadRay).toEqual(['start --head', 'stop', 'start --head']);
      expect(argvOf(lead.calls(), 'ray', 'start')[1]).toContain(`--port=${rendezvous}`);
      expect(lead.livePids()).toHaveLength(1);

      // 4. Teardown: the model leaves the catalog; each member's engine stops, then `ray stop`
      //    runs there, and the rendezvous port is free again.
      await removeModel();
      for (const n of nodes) {
        expect(n.calls().filter((c) => c.cmd === 'ray').at(-1)?.argv).toEqual(['stop']);
        expect(n.livePids()).toEqual([]);
      }
      expect(await portIsFree(rendezvous)).toBe(true);
    },
    300_000,
  );

  it(
    'gives two replicas whose rank 0 shares a node different rendezvous ports, each worker joining its own head',
    async () => {
      // Half a node each: both replicas span both nodes, and placement puts both rank 0 on one.
      const profile = { engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 4, nodes: 2, tensorParallel: 4, pipelineParallel: 2 };
      const { controller, router, nodes, fakeOf, removeModel } = await startCluster(profile, 2);
      await waitFor(() => (router.latest?.endpoints.length === 2 ? true : undefined), { deadlineMs: 120_000, message: 'both replicas published' });
      for (const n of controller.plane.nodes.snapshot().values()) for (const r of n.reported.values()) if (r.pid !== undefined) enginePids.add(r.pid);
      const replicas = [...controller.plane.replicas.values()].map((e) => [...e.replica.members].sort((x, y) => x.rank - y.rank));
      expect(replicas).toHaveLength(2);
      const leaders = replicas.map((m) => m[0]);
      expect(leaders[0].nodeId).toBe(leaders[1].nodeId);
      const ports = leaders.map((m) => m.rendezvousPort as number);
      expect(new Set(ports).size).toBe(2);
      for (const p of ports) expect(p).not.toBe(6379);

      // Both heads run on the shared node, each on its own port; each worker joined its own.
      const shared = fakeOf(leaders[0].nodeId);
      expect(argvOf(shared.calls(), 'ray', 'start').map((a) => a[2]).sort()).toEqual(ports.map((p) => `--port=${p}`).sort());
      expect(shared.livePids()).toHaveLength(2);
      for (const [leader, worker] of replicas) {
        const joined = argvOf(fakeOf(worker.nodeId).calls(), 'ray', 'start').map((a) => a[1]);
        expect(joined).toContain(`--address=127.0.0.1:${leader.rendezvousPort}`);
      }
      await removeModel();
      for (const n of nodes) expect(n.livePids()).toEqual([]);
    },
    300_000,
  );
});
