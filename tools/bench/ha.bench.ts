// High availability under load, one failure after another, at default controller settings:
// PostgreSQL (a throw-away server), two controllers, three routers behind the deploy nginx
// configuration, four agents with simulated engines, clients streaming through nginx throughout.
// Events: kill -9 the leading controller (then start it again as a standby); kill -9 a router
// (then start it again on its port); stop PostgreSQL for --outage seconds; kill -9 the leading
// controller and, at once, a node holding a replica (its agent and engines), so the node dies
// while no controller leads. Run:
//   npm run bench:ha -- [--clients 16] [--outage 60]
import { rmSync } from 'node:fs';
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import { createPostgresDatabase, nginxPrefix, runStreamingLoadInto, startNginx, startPostgres, stopAllSpawned, useTestPki, waitFor, type StreamRecord } from '@llmgw/testing';
import {
  connectedNodes,
  controllerCheck,
  controllerView,
  DEFAULT_TIMING,
  spawnController,
  spawnRouter,
  startFleet,
  type Cleanups,
  type ControllerProcess,
  type Fleet,
} from '../../apps/controller/src/test/ha-fleet.harness';
import { descendantsOf, readProcessTable } from '../launcher/src/process-tree';
import { machineLine, markdownTable, printTable, writeSection } from './bench-report';

interface Args {
  clients: number;
  outageS: number;
}

function readArgs(): Args {
  const { values } = parseArgs({ options: { clients: { type: 'string', default: '16' }, outage: { type: 'string', default: '60' } } });
  const args = { clients: Number(values.clients), outageS: Number(values.outage) };
  for (const [flag, value] of Object.entries(args)) {
    if (!Number.isInteger(value) || value <= 0) {
      process.stderr.write(`ha.bench: --${flag === 'outageS' ? 'outage' : flag} must be a positive whole number\nusage: ha.bench.ts [--clients N] [--outage SECONDS]\n`);
      process.exit(2);
    }
  }
  return args;
}

/** What one event cost. Times from `performance.now()`. */
interface EventResult {
  readonly name: string;
  readonly at: number;
  /** Until every replica is ready on a live node, one controller leads and acts with every live agent and every router attached. */
  fullServiceMs?: number;
  enginesRestarted: number;
  replicasLost: number;
  note: string;
  /** When the action itself was over (the store back, say), if later than `at`. */
  doneAt: number;
}

const log = (line: string): void => void process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const args = readArgs();
  const command = `npm run bench:ha -- --clients ${args.clients} --outage ${args.outageS}`;
  log(`${command}\n${machineLine(os.cpus(), os.totalmem())}\n`);
  const cleanups: Cleanups = [];
  try {
    await run(args, command, cleanups);
  } finally {
    for (const c of cleanups.splice(0).reverse()) await Promise.resolve(c()).catch(() => undefined);
    await stopAllSpawned();
  }
}

async function run(args: Args, command: string, cleanups: Cleanups): Promise<void> {
  // 1. The fleet: four agents with one fake GPU each, a model wanting three replicas (one node free for a replacement),
  //    its gRPC over TLS as deployed (a throw-away PKI).
  const pki = await useTestPki();
  cleanups.push(() => rmSync(pki.dir, { recursive: true, force: true }));
  const pg = await startPostgres();
  cleanups.push(() => pg.close());
  const db = await createPostgresDatabase(pg.url);
  const fleet = await startFleet({ timing: DEFAULT_TIMING, agents: 4, routers: 3, replicas: 3, firstSettle: '3s', database: { url: db.url, direct: db.url }, standbyProcess: true }, cleanups);
  const prefix = await nginxPrefix(fleet.routers.map((r) => r.replace('http://', '')));
  cleanups.push(() => prefix.remove());
  const nginx = await startNginx(prefix);
  cleanups.push(() => nginx.stop('SIGTERM', 5_000));
  const controllers: Record<'A' | 'B', ControllerProcess> = { A: fleet.leader, B: fleet.standbyProc as ControllerProcess };
  const routers = [...fleet.routerProcs];
  const deadNodes = new Set<string>();
  log('fleet ready: 2 controllers, 3 routers behind nginx, 4 agents, 3 replicas');

  const leaderName = async (): Promise<'A' | 'B' | undefined> => {
    for (const name of ['A', 'B'] as const) if ((await controllerView(controllers[name].http))?.leader) return name;
    return undefined;
  };
  const fullService = async (): Promise<boolean> => {
    const name = await leaderName();
    if (name === undefined) return false;
    const leader = controllers[name];
    const view = await controllerView(leader.http);
    const others = await Promise.all((['A', 'B'] as const).filter((n) => n !== name).map((n) => controllerView(controllers[n].http)));
    if (view?.phase !== 'active' || others.some((o) => o?.leader)) return false;
    const live = fleet.nodes.filter((n) => !deadNodes.has(n));
    const connected = await connectedNodes(leader.http).catch((): string[] => []);
    if (!live.every((n) => connected.includes(n))) return false;
    const replicas = await fleet.store.replicas.list().catch(() => undefined);
    const ready = replicas?.filter((r) => r.state === 'ready' && r.members.every((m) => !deadNodes.has(m.nodeId)));
    if (ready?.length !== 3) return false;
    const checks = await Promise.all(fleet.routers.map((r) => controllerCheck(r).catch(() => undefined)));
    return checks.every((c) => c?.connected === true && c.controller === leader.grpc);
  };

  // 2. Streaming load through nginx, throughout.
  const records: StreamRecord[] = [];
  let loading = true;
  const load = runStreamingLoadInto(records, { url: `http://127.0.0.1:${prefix.port}/v1/chat/completions`, model: 'tiny', clients: args.clients, until: () => !loading, maxTokens: 32, stallDeadlineMs: 30_000 });
  await waitFor(() => records.filter((r) => r.outcome === 'ok').length >= args.clients, { deadlineMs: 60_000, message: 'streams flowing through nginx' });
  await waitFor(fullService, { deadlineMs: 60_000, intervalMs: 500, message: 'full service before the first event' });
  await new Promise((r) => setTimeout(r, 10_000));

  const events: EventResult[] = [];
  /**
   * Runs `act`, then waits for full service, counting engines restarted and replicas lost on the
   * way; then runs `afterwards` (what full service does not need, such as a standby started again).
   */
  const event = async (name: string, act: () => Promise<string>, afterwards?: () => Promise<string>): Promise<void> => {
    const enginesBefore = engines(fleet, deadNodes);
    const replicasBefore = (await fleet.store.replicas.list()).filter((r) => r.state !== 'stopped').map((r) => r.id);
    log(`event: ${name}`);
    const at = performance.now();
    const note = await act();
    const result: EventResult = { name, at, enginesRestarted: 0, replicasLost: 0, note, doneAt: performance.now() };
    await waitFor(fullService, { deadlineMs: 300_000, intervalMs: 250, message: `full service after "${name}"` }).then(
      () => (result.fullServiceMs = performance.now() - at),
      (error: unknown) => log(`  not back to full service: ${(error as Error).message}`),
    );
    const enginesAfter = engines(fleet, deadNodes);
    result.enginesRestarted = [...enginesBefore.keys()].filter((node) => !deadNodes.has(node)).reduce((n, node) => n + [...(enginesBefore.get(node) ?? [])].filter((e) => !enginesAfter.get(node)?.has(e)).length, 0);
    const after = new Set((await fleet.store.replicas.list()).filter((r) => r.state !== 'stopped' && r.state !== 'lost').map((r) => r.id));
    result.replicasLost = replicasBefore.filter((id) => !after.has(id)).length;
    if (afterwards) result.note = `${result.note}; ${await afterwards()}`;
    events.push(result);
    log(`  full service after ${result.fullServiceMs === undefined ? '-' : (result.fullServiceMs / 1000).toFixed(1)} s (${sinceDone(result)}); ${note}`);
    await new Promise((r) => setTimeout(r, 10_000));
  };

  // 3. The events, one after another.
  let killed: { name: 'A' | 'B'; port: number } | undefined;
  await event(
    'kill -9 the leading controller',
    async () => {
      const name = (await leaderName()) as 'A' | 'B';
      const killedAt = performance.now();
      await controllers[name].proc.kill9();
      killed = { name, port: Number(controllers[name].grpc.split(':')[1]) };
      const next = await waitFor(leaderName, { deadlineMs: 60_000, intervalMs: 100, message: 'a new leader' });
      return `killed ${name}; ${next} led ${((performance.now() - killedAt) / 1000).toFixed(1)} s after the kill`;
    },
    async () => {
      // Started again as a standby, as its service manager would; full service never waits for it.
      const { name, port } = killed as { name: 'A' | 'B'; port: number };
      controllers[name] = await spawnController(`llmgw-controller ${name}`, port, fleet.controllerEnv);
      cleanups.push(() => controllers[name].proc.kill9());
      return `${name} started again as a standby once full service was back`;
    },
  );
  await event('kill -9 a router', async () => {
    const base = fleet.routers[0];
    const port = Number(new URL(base).port);
    await routers[0].kill9();
    // Started again on its port (nginx lists it), as its service manager would.
    await new Promise((r) => setTimeout(r, 2_000));
    routers[0] = await spawnRouter(0, `${fleet.b},${fleet.a}`, port);
    cleanups.push(() => routers[0].stop('SIGTERM', 10_000));
    return 'router 1 killed, started again on its port after 2 s';
  });
  await event(`stop PostgreSQL for ${args.outageS} s`, async () => {
    await pg.stop();
    await new Promise((r) => setTimeout(r, args.outageS * 1000));
    await pg.start();
    return `store back after ${args.outageS} s`;
  });
  await event('kill -9 a node holding a replica while no controller leads', async () => {
    const name = (await leaderName()) as 'A' | 'B';
    const replica = (await fleet.store.replicas.list()).find((r) => r.state === 'ready');
    const node = replica?.members[0]?.nodeId as string;
    await controllers[name].proc.kill9();
    // The node: its agent and every engine it started (engines run in process groups of their own).
    const agent = fleet.agents[fleet.nodes.indexOf(node)];
    const doomed = [agent.pid, ...descendantsOf(readProcessTable(), [agent.pid]).map((p) => p.pid)];
    deadNodes.add(node);
    for (const pid of doomed) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    return `killed leader ${name}, then ${node} (agent and engines) at once; ${replica?.id} rebuilt elsewhere`;
  });

  loading = false;
  await load;

  // 4. Per event: what ended between it and the next.
  const bounds = [...events.map((e) => e.at), Infinity];
  const rows: string[][] = [['event', 'requests', 'failed before first byte', 'cut (SSE error)', 'cut (connection error)', 'ended without [DONE], no error', 'hung', 'engines restarted', 'replicas lost', 'to full service (s)']];
  const before = records.filter((r) => r.endedAt < bounds[0]);
  rows.push(['before the first event', ...countRow(before), '-', '-', '-']);
  events.forEach((e, i) => {
    const mine = records.filter((r) => r.endedAt >= bounds[i] && r.endedAt < bounds[i + 1]);
    rows.push([e.name, ...countRow(mine), String(e.enginesRestarted), String(e.replicasLost), e.fullServiceMs === undefined ? 'not reached' : (e.fullServiceMs / 1000).toFixed(1)]);
  });
  printTable(rows);
  const body = [
    `Command: \`${command}\``,
    '',
    `Machine: ${machineLine(os.cpus(), os.totalmem())}; shared with other work while it ran.`,
    '',
    `Processes: a throw-away PostgreSQL, two controllers at default settings (lease 15 s renewed every 5 s, heartbeat 5 s, ` +
      `unreachable 15 s, lost 60 s, settle 20 s + 40 s for missing holders), three routers behind deploy/nginx/llmgw.conf, four ` +
      `agents with one fake H100 each running sim-engine replicas of a model wanting three (least-load). ${args.clients} clients ` +
      `stream 32-token chat completions through nginx throughout. A request is counted under the last event before it ended. ` +
      `"Full service": one controller leads and acts, every live agent and all three routers attached to it, three replicas ready on live nodes. ` +
      `Engines restarted: engine processes (pid and start time) on surviving nodes that are gone after the event.`,
    '',
    markdownTable(rows),
    '',
    ...events.map((e) => `- ${e.name}: ${e.note}; full service ${sinceDone(e)}.`),
    '',
    READING,
  ].join('\n');
  log(`wrote ${writeSection('ha', 'High availability under load (leader, router, store, node)', body)}`);
}

/** What the table cannot say by itself; written under it. */
const READING = [
  'Reading it: for the leader kill, full service is counted from the kill and needs only the standby that takes over; the killed ' +
    'controller is started again afterwards. The takeover time in the note is the figure to compare with the lease. The router kill ' +
    'includes starting the router again (full service needs all three routers attached; a process from source on this machine takes several seconds). Streams cut by a connection error are those in ' +
    'flight on the router that was killed: nobody is left to write an error event, and nginx ends the response before its last chunk, ' +
    'which the client sees as an error; none may end cleanly without [DONE] (the column after). Streams cut with an SSE ' +
    'error are those in flight on the engines of the node that was killed; the router wrote the error. The node\'s replica is rebuilt only ' +
    'once the new leader marks the node lost, 60 s (the default lost window) after its term began, since health clocks start at the term.',
].join('');

/** How long full service took after the action itself was over (a controller started again, the store back). */
function sinceDone(e: EventResult): string {
  return e.fullServiceMs === undefined ? 'not reached' : `${((e.at + e.fullServiceMs - e.doneAt) / 1000).toFixed(1)} s after the action was over`;
}

function countRow(records: readonly StreamRecord[]): string[] {
  const n = (f: (r: StreamRecord) => boolean): string => String(records.filter(f).length);
  return [
    String(records.length),
    n((r) => r.outcome === 'failed'),
    n((r) => r.outcome === 'cut' && r.errorEvent),
    n((r) => r.outcome === 'cut' && !r.errorEvent && r.connectionError),
    n((r) => r.outcome === 'cut' && !r.errorEvent && !r.connectionError),
    n((r) => r.outcome === 'hung'),
  ];
}

/** Per live node, its engine processes as `pid:start time` (the agent's descendants). */
function engines(fleet: Fleet, dead: ReadonlySet<string>): Map<string, Set<string>> {
  const table = readProcessTable();
  const out = new Map<string, Set<string>>();
  fleet.nodes.forEach((node, i) => {
    if (dead.has(node)) return;
    out.set(node, new Set(descendantsOf(table, [fleet.agents[i].pid]).map((p) => `${p.pid}:${p.startTime}`)));
  });
  return out;
}

main().catch((error: unknown) => {
  process.stderr.write(`ha.bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
