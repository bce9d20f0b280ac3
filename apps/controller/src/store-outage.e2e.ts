// PostgreSQL away under the leader at default settings (lease 15 s renewed every 5 s, settle
// 20 s, unreachable 15 s, lost 60 s): two controllers, real agent processes with simulated
// engines, two routers behind the deploy nginx configuration, 8 clients streaming through nginx
// throughout. The store is a throw-away server the controllers reach through a TCP proxy:
// - stopped for 60 s (`pg_ctl stop -m fast`, then started again on the same port);
// - slow for 30 s: every chunk toward the server held 2 s, so every query takes 2 s longer;
// - refusing for 30 s: every open connection reset and every new one refused;
// - refusing new connections for 30 s while open ones keep working (a server at its limit).
// The slow and refusing cases last 30 s: past the 14 s a claim is kept without a renewal, so a
// leader that could not renew gives it up inside the window, and everything after that (no
// leader, then one again) happens as in the 60 s case.
// Each case: 0 requests failed, cut or hung; no replica stopped, restarted, replaced or moved; no
// node marked unreachable or lost; never two leaders; once the store is back exactly one
// controller leads, every agent and router is attached to it, and it sent no start or stop.
import { createPostgresDatabase, nginxPrefix, runStreamingLoadInto, startNginx, startPostgres, startTcpProxy, stopAllSpawned, waitFor, type PostgresServer, type StreamRecord, type TcpProxy } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectedNodes, controllerCheck, controllerView, DEFAULT_TIMING, replicasOf, startFleet, type Cleanups, type ControllerView, type Fleet } from './test/ha-fleet.harness';

const cleanups: Cleanups = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

let pg: PostgresServer;
let proxy: TcpProxy;
let fleet: Fleet;
let entry: string;

beforeAll(async () => {
  pg = await startPostgres();
  cleanups.push(() => pg.close());
  proxy = await startTcpProxy({ port: pg.port });
  cleanups.push(() => proxy.close());
  const db = await createPostgresDatabase(pg.url);
  const viaProxy = new URL(db.url);
  viaProxy.port = String(proxy.port);
  fleet = await startFleet({ timing: DEFAULT_TIMING, agents: 2, routers: 2, firstSettle: '3s', database: { url: viaProxy.toString(), direct: db.url }, standbyProcess: true }, cleanups);
  const prefix = await nginxPrefix(fleet.routers.map((r) => r.replace('http://', '')));
  cleanups.push(() => prefix.remove());
  const nginx = await startNginx(prefix);
  cleanups.push(() => nginx.stop('SIGTERM', 5_000));
  entry = `http://127.0.0.1:${prefix.port}`;
}, 300_000);

const controllers = (): { name: string; grpc: string; http: string }[] => [
  { name: 'A', grpc: fleet.a, http: fleet.leader.http },
  { name: 'B', grpc: fleet.b, http: (fleet.standbyProc as { http: string }).http },
];

/** The one controller that leads and acts, with every agent and router attached to it; undefined until then. */
async function servingLeader(): Promise<{ name: string; grpc: string; http: string } | undefined> {
  const views = await Promise.all(controllers().map(async (c) => ({ c, v: await controllerView(c.http) })));
  const leaders = views.filter((x) => x.v?.leader === true);
  if (views.some((x) => x.v === undefined) || leaders.length !== 1 || leaders[0].v?.phase !== 'active') return undefined;
  const leader = leaders[0].c;
  if ((await connectedNodes(leader.http)).length !== fleet.nodes.length) return undefined;
  const routers = await Promise.all(fleet.routers.map(controllerCheck));
  return routers.every((d) => d.connected === true && d.controller === leader.grpc) ? leader : undefined;
}

const commandsOf = (views: (ControllerView | undefined)[]): number => views.reduce((n, v) => n + (v?.startReplica ?? 0) + (v?.stopReplica ?? 0), 0);

/**
 * Runs streaming load through nginx, takes the store away with `begin` for `outageMs`, brings it
 * back with `end`, waits for one serving leader, and checks what the outage cost.
 */
async function rideOut(label: string, outageMs: number, begin: () => Promise<void>, end: () => Promise<void>): Promise<void> {
  const first = await waitFor(servingLeader, { deadlineMs: 120_000, intervalMs: 500, message: 'one serving leader before the outage' });
  const replicasBefore = await replicasOf(first.http);
  expect(replicasBefore.map((r) => [r.state, r.restarts])).toEqual(fleet.nodes.map(() => ['ready', 0]));
  const commandsBefore = commandsOf(await Promise.all(controllers().map((c) => controllerView(c.http))));
  const records: StreamRecord[] = [];
  let loading = true;
  const load = runStreamingLoadInto(records, { url: `${entry}/v1/chat/completions`, model: 'tiny', clients: 8, until: () => !loading, maxTokens: 32, stallDeadlineMs: 30_000 });
  await waitFor(() => records.filter((r) => r.outcome === 'ok').length >= 8, { deadlineMs: 60_000, message: 'streams flowing through nginx' });

  // 1. The outage: every second, how many controllers say they lead, and whether every router is ready.
  const startedAt = Date.now();
  await begin();
  const samples: { at: number; leaders: string[]; unready: string[] }[] = [];
  while (Date.now() - startedAt < outageMs) {
    const views = await Promise.all(controllers().map(async (c) => ({ c, v: await controllerView(c.http) })));
    const unready = (await Promise.all(fleet.routers.map(async (r) => ((await fetch(`${r}/readyz`).catch(() => undefined))?.status === 200 ? undefined : r)))).filter((r) => r !== undefined);
    samples.push({ at: Date.now() - startedAt, leaders: views.filter((x) => x.v?.leader).map((x) => x.c.name), unready });
    await new Promise((r) => setTimeout(r, 1_000));
  }
  await end();
  const endedAt = Date.now();

  // 2. Back: exactly one controller leads and acts, agents and routers on it; streams go on.
  const leader = await waitFor(servingLeader, { deadlineMs: 120_000, intervalMs: 250, message: 'one serving leader after the outage' });
  const servingAt = Date.now();
  const okAtServing = records.filter((r) => r.outcome === 'ok').length;
  await waitFor(() => records.filter((r) => r.outcome === 'ok').length >= okAtServing + 16, { deadlineMs: 60_000, message: 'streams after the outage' });
  loading = false;
  await load;

  const lastLeading = samples.filter((s) => s.leaders.length > 0).at(-1)?.at;
  const tally = { ok: 0, failed: 0, cut: 0, hung: 0 };
  for (const r of records) tally[r.outcome] += 1;
  console.log(
    `store ${label} for ${outageMs / 1000} s: a controller led until +${lastLeading === undefined ? '-' : (lastLeading / 1000).toFixed(1)} s; ` +
      `${leader.name} serving (leading, agents and routers attached) ${((servingAt - endedAt) / 1000).toFixed(1)} s after the store came back; streams ${JSON.stringify(tally)}`,
  );

  expect(records.filter((r) => r.outcome !== 'ok').map((r) => `${r.outcome}: ${r.status ?? ''} ${r.detail ?? ''}`)).toEqual([]);
  expect(tally.ok).toBeGreaterThan(24);
  expect(samples.filter((s) => s.leaders.length > 1)).toEqual([]);
  expect(samples.filter((s) => s.unready.length > 0)).toEqual([]);
  // Same replicas, same engines at the same addresses, none restarted; nothing started or stopped.
  expect(await replicasOf(leader.http)).toEqual(replicasBefore);
  expect(commandsOf(await Promise.all(controllers().map((c) => controllerView(c.http))))).toBe(commandsBefore);
  const events = (await fleet.store.events.list({ limit: 1000 })).filter((e) => e.time >= startedAt && e.kind !== 'adopted');
  expect(events.map((e) => `${e.kind} ${e.nodeId ?? ''} ${e.replicaId ?? ''} ${e.reason ?? ''}`)).toEqual([]);
}

describe('the store away under the leader, at default settings (PostgreSQL, real agents and routers, nginx, streaming load)', () => {
  it('PostgreSQL stopped for 60 s: nothing failed, stopped, restarted or replaced; one leader after, with no start or stop', async () => {
    await rideOut('stopped', 60_000, () => pg.stop(), () => pg.start());
  }, 400_000);

  it('PostgreSQL answering 2 s late for 30 s: the same', async () => {
    await rideOut(
      'slow (2 s per query)',
      30_000,
      async () => proxy.setMode({ kind: 'delay', delayMs: 2_000 }),
      async () => proxy.setMode({ kind: 'pass' }),
    );
  }, 300_000);

  it('PostgreSQL refusing connections for 30 s: the same', async () => {
    await rideOut(
      'refusing connections',
      30_000,
      async () => proxy.setMode({ kind: 'cut' }),
      async () => proxy.setMode({ kind: 'pass' }),
    );
  }, 300_000);

  it('PostgreSQL refusing new connections for 30 s while open ones still work (at its connection limit): the same', async () => {
    const refusedBefore = proxy.counts.refused;
    await rideOut(
      'refusing new connections only',
      30_000,
      async () => proxy.setMode({ kind: 'refuse' }),
      async () => proxy.setMode({ kind: 'pass' }),
    );
    console.log(`connections refused meanwhile: ${proxy.counts.refused - refusedBefore}`);
  }, 300_000);
});
