// A leader change as an operator meets it: two controllers on PostgreSQL, the leader a real
// process killed with SIGKILL, real agent processes with simulated engines, a real router
// process that knows both controllers. Nothing is failed, restarted, replaced or marked
// unreachable by the takeover, agents and the router reach the new leader quickly, and the
// standby never sends anybody to the dead leader once it stopped renewing. Also: engine failures
// an agent could not report while no leader listened are recorded by the leader it reaches.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplicaState } from '@llmgw/proto';
import { openStore } from '@llmgw/store';
import { freePort, postgresBackend, runTsEntry, spawnProcess, sqliteBackend, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { parseOwner } from './leadership/advertised-lease.store';
import { FakeAgent } from './test/agent.fake';
import { startAgent } from './test/agent-process.harness';
import { catalogDoc, catalogFile, startController } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

const cleanEnv = (): Record<string, string> =>
  Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined && !e[0].startsWith('LLMGW_') && !e[0].startsWith('HF_')));

/** Timings of both controllers: a 3 s lease renewed every 1 s, 500 ms heartbeats, windows well above a takeover. */
const LEASE = { LLMGW_CONTROLLER_LEASE: 'controller', LLMGW_CONTROLLER_LEASE_TTL: '3s', LLMGW_CONTROLLER_LEASE_RENEW: '1s' };
const TIMING = {
  LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '500ms',
  LLMGW_CONTROLLER_UNREACHABLE_AFTER: '4s',
  LLMGW_CONTROLLER_LOST_AFTER: '20s',
  LLMGW_CONTROLLER_SETTLE: '3s',
  LLMGW_CONTROLLER_SETTLE_HOLDERS: '10s',
  LLMGW_CONTROLLER_TICK: '200ms',
};

describe('leader killed with SIGKILL (PostgreSQL, real agents and router)', () => {
  it(
    'the standby takes over with no request failed, no engine restarted, no replica replaced, no node unreachable; agents and router follow at once',
    async () => {
      const root = mkdtempSync(join(tmpdir(), 'llmgw-leader-kill-'));
      cleanups.push(() => rmSync(root, { recursive: true, force: true }));
      const weights = join(root, 'tiny.gguf');
      writeFileSync(weights, 'not really weights: the simulator does not read them');
      const file = catalogFile({ models: [{ name: 'tiny', source: `file://${weights}`, size: '1MB', replicas: 2, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }] }] });
      const db = await postgresBackend.create();
      cleanups.push(() => db.drop(), () => file.cleanup());
      const store = await openStore(db.url);
      cleanups.push(() => store.close());

      // 1. Controller A, a process, leads; then standby B starts in this process.
      const [pa, pb] = [await freePort(), await freePort()];
      const [a, b] = [`127.0.0.1:${pa}`, `127.0.0.1:${pb}`];
      const leaderProc = await spawnProcess({
        ...runTsEntry('apps/controller/src/main.ts'),
        name: 'llmgw-controller A',
        cleanEnv: true,
        env: {
          ...cleanEnv(),
          ...LEASE,
          ...TIMING,
          LLMGW_DATA_DIR: root,
          LLMGW_DATABASE_URL: db.url,
          LLMGW_CONTROLLER_PORT: '0',
          LLMGW_CONTROLLER_GRPC_PORT: String(pa),
          LLMGW_CONTROLLER_ADVERTISE_ADDRESS: a,
          LLMGW_CONTROLLER_CATALOG_FILE: file.path,
          LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true',
        },
        readyWhen: { stdoutMatch: /llmgw-controller listening on/ },
        deadlineMs: 90_000,
      });
      cleanups.push(() => leaderProc.kill9());
      await waitFor(async () => {
        const row = await store.leases.get('controller');
        return row?.held === true && parseOwner(row.owner).address === a;
      }, { deadlineMs: 30_000, message: 'A leads' });
      const standby = await startController({
        ...LEASE,
        ...TIMING,
        LLMGW_DATABASE_URL: db.url,
        LLMGW_CONTROLLER_GRPC_PORT: String(pb),
        LLMGW_CONTROLLER_ADVERTISE_ADDRESS: b,
        LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      });
      cleanups.push(() => standby.close());
      expect(standby.plane.leadership.isLeader()).toBe(false);

      // 2. Two agents and a router, each knowing both controllers.
      // The agents' reconnect settings at their defaults.
      const agentEnv = { LLMGW_AGENT_FAKE_GPUS: '1xH100-80GB', LLMGW_AGENT_RECONNECT_MIN: '500ms', LLMGW_AGENT_RECONNECT_MAX: '30s' };
      const agents = await Promise.all(['node-a', 'node-b'].map((id) => startAgent(id, `${a},${b}`, root, { env: agentEnv })));
      cleanups.push(() => Promise.all(agents.map((x) => x.stop('SIGTERM', 10_000))));
      const router = await spawnProcess({
        ...runTsEntry('apps/router/src/main.ts'),
        name: 'llmgw-router',
        cleanEnv: true,
        env: { ...cleanEnv(), LLMGW_ROUTER_PORT: '0', LLMGW_ROUTER_CONTROLLER: `${b},${a}`, LLMGW_ROUTER_WATCH_BACKOFF_MIN: '200ms' },
        readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
        deadlineMs: 90_000,
      });
      cleanups.push(() => router.stop('SIGTERM', 10_000));
      const base = router.readyMatch?.[1] as string;
      const ask = async (): Promise<number> =>
        (
          await fetch(`${base}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
          }).catch(() => ({ status: 0 }))
        ).status;
      await waitFor(async () => (await store.replicas.list()).filter((r) => r.state === 'ready').length === 2, { deadlineMs: 120_000, message: 'two ready replicas' });
      await waitFor(async () => (await ask()) === 200, { deadlineMs: 30_000, message: 'the router serves through A' });
      const before = (await store.replicas.list()).map((r) => r.id).sort();
      const controllerCheck = async (): Promise<Record<string, unknown>> =>
        ((await (await fetch(`${base}/readyz`)).json()) as { checks: Record<string, { detail: Record<string, unknown> }> }).checks['controller'].detail;
      expect(await controllerCheck()).toMatchObject({ connected: true, controller: a });

      // 3. Load throughout; then kill -9 the leader.
      const outcomes: number[] = [];
      let loading = true;
      const load = (async () => {
        while (loading) outcomes.push(await ask());
      })();
      await new Promise((r) => setTimeout(r, 500));
      const killedAt = Date.now();
      await leaderProc.kill9();
      await waitFor(() => standby.plane.leadership.isLeader(), { deadlineMs: 20_000, intervalMs: 20, message: 'B takes over' });
      const takeoverAt = Date.now();
      await waitFor(() => ['node-a', 'node-b'].every((id) => standby.plane.nodes.get(id)?.connected === true), { deadlineMs: 20_000, intervalMs: 20, message: 'agents on B' });
      const agentsAt = Date.now();
      await waitFor(async () => (await controllerCheck()).connected === true && (await controllerCheck()).controller === b, { deadlineMs: 20_000, intervalMs: 50, message: 'router on B' });
      const routerAt = Date.now();
      await waitFor(() => standby.plane.phase === 'active', { deadlineMs: 20_000, message: 'B active' });
      await new Promise((r) => setTimeout(r, 2_000));
      loading = false;
      await load;
      console.log(
        `leader kill: takeover ${takeoverAt - killedAt} ms after the kill; agents on the new leader ${agentsAt - takeoverAt} ms after it, router ${routerAt - takeoverAt} ms after it; ${outcomes.length} requests`,
      );

      // 4. Nothing failed, restarted, replaced or marked unreachable.
      expect(outcomes.filter((s) => s !== 200)).toEqual([]);
      expect(outcomes.length).toBeGreaterThan(10);
      expect(standby.plane.sessions.sent.startReplica).toBe(0);
      expect(standby.plane.sessions.sent.stopReplica).toBe(0);
      expect((await store.replicas.list()).map((r) => r.id).sort()).toEqual(before);
      expect([...standby.plane.replicas.values()].map((e) => [e.replica.state, e.replica.restarts])).toEqual([
        ['ready', 0],
        ['ready', 0],
      ]);
      expect(standby.logs.filter((l) => l.msg === 'node unreachable: no new placements, its endpoints suspect')).toEqual([]);
      // Loose bounds for a loaded machine; the target is 5 s at default settings.
      expect(agentsAt - takeoverAt).toBeLessThan(10_000);
      expect(routerAt - takeoverAt).toBeLessThan(10_000);
      // Once A had missed two renewals, B named nobody (never the dead A) to agents or routers.
      const late = standby.logs.filter((l) => typeof l.time === 'number' && l.time > killedAt + 2_500 && typeof l.msg === 'string' && l.msg.startsWith('not the leader'));
      expect(late.filter((l) => l.leader === a)).toEqual([]);
    },
    300_000,
  );
});

describe('engine failures no leader heard', () => {
  it('are recorded as failed events at the time they happened and counted as restarts of their replica; the replica stays as it is', async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    cleanups.push(() => db.drop(), () => file.cleanup());
    const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '300ms' });
    cleanups.push(() => controller.close());
    const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc] });
    cleanups.push(() => agent.stop());
    agent.connect();
    const replica = await waitFor(() => [...controller.plane.replicas.values()].find((r) => r.replica.state === 'ready'), { deadlineMs: 20_000, message: 'a ready replica' });
    const id = replica.replica.id;
    const at = Date.now() - 30_000;
    agent.reportUnheard([
      { status: { replicaId: id, state: ReplicaState.REPLICA_STATE_FAILED, reason: 'engine was killed by SIGKILL; restart 1/3 in 1000 ms', signal: 'SIGKILL', lastLogLines: [], restarts: 0 }, atUnixMs: at },
      { status: { replicaId: id, state: ReplicaState.REPLICA_STATE_FAILED, reason: 'engine exited with code 1; restart 2/3 in 2000 ms', exitCode: 1, lastLogLines: [], restarts: 1 }, atUnixMs: at + 5_000 },
    ]);
    await waitFor(() => controller.plane.replicas.get(id)?.replica.restarts === 2, { deadlineMs: 10_000, message: 'two restarts counted' });
    expect(controller.plane.replicas.get(id)?.replica.state).toBe('ready');
    const store = await openStore(db.url);
    cleanups.push(() => store.close());
    const events = await waitFor(
      async () => {
        const list = (await store.events.list({ replicaId: id })).filter((e) => e.kind === 'failed');
        return list.length === 2 ? list : undefined;
      },
      { deadlineMs: 10_000, message: 'two failed events' },
    );
    expect(events.map((e) => [e.time, e.nodeId, e.model, e.reason]).sort()).toEqual([
      [at, 'node-1', 'llama', 'engine was killed by SIGKILL; restart 1/3 in 1000 ms (while no leader listened)'],
      [at + 5_000, 'node-1', 'llama', 'engine exited with code 1; restart 2/3 in 2000 ms (while no leader listened)'],
    ]);
    await waitFor(async () => (await store.replicas.list()).find((r) => r.id === id)?.restarts === 2, { deadlineMs: 10_000, message: 'restarts stored' });
    // Nothing was started or stopped for it.
    expect(agent.commands('startReplica')).toHaveLength(1);
    expect(agent.commands('stopReplica')).toHaveLength(0);
  });
});
