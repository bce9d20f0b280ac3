// A leader change as an operator meets it: two controllers on PostgreSQL, the leader a real
// process killed with SIGKILL, real agent processes with simulated engines, real router
// processes that know both controllers (one directly with short timings; three behind the
// deploy nginx configuration at default settings, under streaming load). Nothing is failed,
// restarted, replaced or marked unreachable by the takeover, agents and routers reach the new
// leader quickly, and the standby never sends anybody to the dead leader once it stopped
// renewing. Also: engine failures an agent could not report while no leader listened are
// recorded by the leader it reaches.
import { ReplicaState } from '@llmgw/proto';
import { openStore } from '@llmgw/store';
import { nginxPrefix, sqliteBackend, startNginx, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, type TestController } from './test/controller.harness';
import { chatBody, choicesByReplica, controllerCheck, DEFAULT_TIMING as DEFAULTS, startFleet as startHaFleet, type Fleet } from './test/ha-fleet.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

/** Short timings: a 3 s lease renewed every 1 s, 500 ms heartbeats, windows well above a takeover. */
const SHORT = {
  LLMGW_CONTROLLER_LEASE_TTL: '3s',
  LLMGW_CONTROLLER_LEASE_RENEW: '1s',
  LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '500ms',
  LLMGW_CONTROLLER_UNREACHABLE_AFTER: '4s',
  LLMGW_CONTROLLER_LOST_AFTER: '20s',
  LLMGW_CONTROLLER_SETTLE: '3s',
  LLMGW_CONTROLLER_SETTLE_HOLDERS: '10s',
  LLMGW_CONTROLLER_TICK: '200ms',
};

/** A and B as the tests below use them: A a process, B in this process. */
type LocalFleet = Fleet & { standby: TestController };

async function startFleet(timing: Record<string, string>, agents: number, routers: number, firstSettle: string): Promise<LocalFleet> {
  const fleet = await startHaFleet({ timing, agents, routers, firstSettle }, cleanups);
  return { ...fleet, standby: fleet.standby as TestController };
}

/** What the takeover cost, from the new leader's view and the store. */
async function expectNothingChurned(fleet: LocalFleet, before: readonly string[]): Promise<void> {
  const { standby, store } = fleet;
  expect(standby.plane.sessions.sent.startReplica).toBe(0);
  expect(standby.plane.sessions.sent.stopReplica).toBe(0);
  expect((await store.replicas.list()).map((r) => r.id).sort()).toEqual(before);
  expect([...standby.plane.replicas.values()].map((e) => [e.replica.state, e.replica.restarts])).toEqual(before.map(() => ['ready', 0]));
  expect(standby.logs.filter((l) => l.msg === 'node unreachable: no new placements, its endpoints suspect')).toEqual([]);
  expect(standby.logs.filter((l) => l.msg === 'node lost: its replicas count as gone')).toEqual([]);
}

/** The standby named nobody, and never the dead leader, once `since` (two missed renewals) had passed. */
function expectNoDeadLeaderNamed(fleet: LocalFleet, since: number): void {
  const late = fleet.standby.logs.filter((l) => typeof l.time === 'number' && l.time > since && typeof l.msg === 'string' && l.msg.startsWith('not the leader'));
  expect(late.filter((l) => l.leader === fleet.a)).toEqual([]);
}

describe('leader killed with SIGKILL (PostgreSQL, real agents and routers)', () => {
  it(
    'short timings, one router: the standby takes over with no request failed, no engine restarted, no replica replaced, no node unreachable; agents and router follow at once',
    async () => {
      const fleet = await startFleet(SHORT, 2, 1, '3s');
      const { standby, a, b } = fleet;
      const [base] = fleet.routers;
      const ask = async (): Promise<number> =>
        (await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody(false) }).catch(() => ({ status: 0 }))).status;
      await waitFor(async () => (await ask()) === 200, { deadlineMs: 30_000, message: 'the router serves through A' });
      const before = (await fleet.store.replicas.list()).map((r) => r.id).sort();
      expect(await controllerCheck(base)).toMatchObject({ connected: true, controller: a });

      // Load throughout; then kill -9 the leader.
      const outcomes: number[] = [];
      let loading = true;
      const load = (async () => {
        while (loading) outcomes.push(await ask());
      })();
      await new Promise((r) => setTimeout(r, 500));
      const killedAt = Date.now();
      await fleet.leader.proc.kill9();
      await waitFor(() => standby.plane.leadership.isLeader(), { deadlineMs: 20_000, intervalMs: 20, message: 'B takes over' });
      const takeoverAt = Date.now();
      await waitFor(() => fleet.nodes.every((id) => standby.plane.nodes.get(id)?.connected === true), { deadlineMs: 20_000, intervalMs: 20, message: 'agents on B' });
      const agentsAt = Date.now();
      await waitFor(async () => (await controllerCheck(base)).controller === b && (await controllerCheck(base)).connected === true, { deadlineMs: 20_000, intervalMs: 50, message: 'router on B' });
      const routerAt = Date.now();
      await waitFor(() => standby.plane.phase === 'active', { deadlineMs: 20_000, message: 'B active' });
      await new Promise((r) => setTimeout(r, 2_000));
      loading = false;
      await load;
      console.log(
        `leader kill (short timings): takeover ${takeoverAt - killedAt} ms after the kill; agents on the new leader ${agentsAt - takeoverAt} ms after it, router ${routerAt - takeoverAt} ms after it; ${outcomes.length} requests`,
      );

      expect(outcomes.filter((s) => s !== 200)).toEqual([]);
      expect(outcomes.length).toBeGreaterThan(10);
      await expectNothingChurned(fleet, before);
      // Loose bounds for a loaded machine.
      expect(agentsAt - takeoverAt).toBeLessThan(10_000);
      expect(routerAt - takeoverAt).toBeLessThan(10_000);
      expectNoDeadLeaderNamed(fleet, killedAt + 2_500);
    },
    300_000,
  );

  it(
    'default settings, three routers behind nginx, 16 clients streaming: 0 failed before the first byte, 0 streams cut or hung, 0 engines restarted, every agent and router on the new leader within 5 s',
    async () => {
      const fleet = await startFleet(DEFAULTS, 2, 3, '3s');
      const { standby, b } = fleet;
      const prefix = await nginxPrefix(fleet.routers.map((r) => r.replace('http://', '')));
      cleanups.push(() => prefix.remove());
      const nginx = await startNginx(prefix);
      cleanups.push(() => nginx.stop('SIGTERM', 5_000));
      const entry = `http://127.0.0.1:${prefix.port}`;
      for (const r of fleet.routers) await waitFor(async () => (await fetch(`${r}/readyz`)).status === 200, { deadlineMs: 30_000, message: `${r} ready` });
      const before = (await fleet.store.replicas.list()).map((r) => r.id).sort();

      // 16 clients stream through nginx throughout. A stream counts as failed when its answer is
      // not a 200 (nothing had reached the client), cut when it carries an error event or ends
      // without [DONE], hung when it does not end within 60 s.
      const tally = { ok: 0, failed: 0, cut: 0, hung: 0 };
      const failures: string[] = [];
      let loading = true;
      const client = async (): Promise<void> => {
        while (loading) {
          try {
            const res = await fetch(`${entry}/v1/chat/completions`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: chatBody(true),
              signal: AbortSignal.timeout(60_000),
            });
            if (res.status !== 200) {
              tally.failed += 1;
              failures.push(`${res.status} ${(await res.text()).slice(0, 200)}`);
              continue;
            }
            const text = await res.text();
            if (text.includes('"error"') || !text.includes('data: [DONE]')) {
              tally.cut += 1;
              failures.push(`cut: ${text.slice(-200)}`);
            } else tally.ok += 1;
          } catch (error) {
            if ((error as Error).name === 'TimeoutError') tally.hung += 1;
            else tally.failed += 1;
            failures.push(String(error));
          }
        }
      };
      const clients = Array.from({ length: 16 }, () => client());
      await waitFor(() => tally.ok >= 16, { deadlineMs: 60_000, message: 'streams flowing through nginx' });

      const choicesAtKill = await choicesByReplica(fleet.routers);
      const killedAt = Date.now();
      await fleet.leader.proc.kill9();
      await waitFor(() => standby.plane.leadership.isLeader(), { deadlineMs: 30_000, intervalMs: 20, message: 'B takes over' });
      const takeoverAt = Date.now();
      await waitFor(() => fleet.nodes.every((id) => standby.plane.nodes.get(id)?.connected === true), { deadlineMs: 30_000, intervalMs: 20, message: 'agents on B' });
      const agentsAt = Date.now();
      await waitFor(
        async () => (await Promise.all(fleet.routers.map(controllerCheck))).every((d) => d.connected === true && d.controller === b),
        { deadlineMs: 30_000, intervalMs: 50, message: 'routers on B' },
      );
      const routersAt = Date.now();
      await waitFor(() => standby.plane.phase === 'active', { deadlineMs: 30_000, message: 'B active' });
      // Streams go on through the new leader's first reconcile passes.
      const okAtActive = tally.ok;
      await waitFor(() => tally.ok >= okAtActive + 16, { deadlineMs: 60_000, message: 'streams after the takeover' });
      loading = false;
      await Promise.all(clients);
      const choicesAtEnd = await choicesByReplica(fleet.routers);
      const during = before.map((id) => (choicesAtEnd.get(id) ?? 0) - (choicesAtKill.get(id) ?? 0));
      console.log(
        `leader kill (defaults, nginx + 3 routers): takeover ${takeoverAt - killedAt} ms after the kill; agents on the new leader ${agentsAt - takeoverAt} ms after it, routers ${routersAt - takeoverAt} ms; streams ${JSON.stringify(tally)}; requests per replica from the kill on ${JSON.stringify(during)}`,
      );

      expect(failures).toEqual([]);
      expect(tally).toMatchObject({ failed: 0, cut: 0, hung: 0 });
      // Both replicas kept serving their share through the takeover (±20 % of the mean).
      const mean = during.reduce((x, y) => x + y, 0) / during.length;
      expect(mean).toBeGreaterThan(50);
      for (const n of during) expect(Math.abs(n - mean)).toBeLessThanOrEqual(0.2 * mean);
      await expectNothingChurned(fleet, before);
      expect(agentsAt - takeoverAt).toBeLessThan(5_000);
      expect(routersAt - takeoverAt).toBeLessThan(5_000);
      // At default settings two renewals are missed 10 s after the last one.
      expectNoDeadLeaderNamed(fleet, killedAt + 10_500);
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
