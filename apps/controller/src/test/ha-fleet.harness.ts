// Test support: a highly available fleet as an operator runs it, for the leader-change and
// store-outage e2e tests and `npm run bench:ha`: two controllers sharing a lease on PostgreSQL,
// real agent processes with simulated engines, real router processes that know both
// controllers, and the controllers' views read back through their admin API and metrics.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@llmgw/store';
import { freePort, inheritedTestEnv, killProcessesMentioning, postgresBackend, runTsEntry, spawnProcess, waitFor, type SpawnedProcess } from '@llmgw/testing';
import { parseOwner } from '../leadership/advertised-lease.store';
import { startAgent } from './agent-process.harness';
import { catalogFile, startController, type TestController } from './controller.harness';

/** Cleanups a caller runs in reverse order when done. */
export type Cleanups = (() => Promise<unknown> | void)[];

/**
 * The defaults (lease 15 s renewed every 5 s, heartbeats 5 s, unreachable 15 s, lost 60 s,
 * settle 20 s + 40 s for missing holders, tick 1 s), set over the test harness's fast ones.
 */
export const DEFAULT_TIMING: Record<string, string> = {
  LLMGW_CONTROLLER_LEASE_TTL: '15s',
  LLMGW_CONTROLLER_LEASE_RENEW: '5s',
  LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '5s',
  LLMGW_CONTROLLER_UNREACHABLE_AFTER: '15s',
  LLMGW_CONTROLLER_LOST_AFTER: '60s',
  LLMGW_CONTROLLER_SETTLE: '20s',
  LLMGW_CONTROLLER_SETTLE_HOLDERS: '40s',
  LLMGW_CONTROLLER_TICK: '1s',
  LLMGW_CONTROLLER_BACKOFF_MIN: '5s',
  LLMGW_CONTROLLER_BACKOFF_MAX: '5m',
};

/** This process's environment without llmgw settings, for the processes a fleet starts. */
export const cleanEnv = (): Record<string, string> => inheritedTestEnv(['HF_']);

/** A controller process: its gRPC address (also what it advertises) and admin base URL. */
export interface ControllerProcess {
  readonly proc: SpawnedProcess;
  readonly grpc: string;
  readonly http: string;
}

/** Starts llmgw-controller as a process with `env` on gRPC `port` (advertised as 127.0.0.1:port), its HTTP port chosen by the OS. */
export async function spawnController(name: string, port: number, env: Record<string, string>): Promise<ControllerProcess> {
  const grpc = `127.0.0.1:${port}`;
  const proc = await spawnProcess({
    ...runTsEntry('apps/controller/src/main.ts'),
    name,
    cleanEnv: true,
    env: { ...cleanEnv(), ...env, LLMGW_CONTROLLER_PORT: '0', LLMGW_CONTROLLER_GRPC_PORT: String(port), LLMGW_CONTROLLER_ADVERTISE_ADDRESS: grpc, LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true' },
    readyWhen: { stdoutMatch: /llmgw-controller listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 90_000,
  });
  return { proc, grpc, http: proc.readyMatch?.[1] as string };
}

/** Starts router `i` (`router-<i+1>`) knowing `controllers` (a comma list) on `port` (0: the OS chooses); ready once it listens. */
export function spawnRouter(i: number, controllers: string, port = 0): Promise<SpawnedProcess> {
  return spawnProcess({
    ...runTsEntry('apps/router/src/main.ts'),
    name: `llmgw-router ${i + 1}`,
    cleanEnv: true,
    env: { ...cleanEnv(), LLMGW_ROUTER_PORT: String(port), LLMGW_ROUTER_ID: `router-${i + 1}`, LLMGW_ROUTER_CONTROLLER: controllers },
    readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 90_000,
  });
}

/** Starts `count` router processes; router i knows `controllersOf(i)` (a comma list). Resolves with their base URLs. */
export async function spawnRouters(count: number, controllersOf: (i: number) => string, cleanups: Cleanups): Promise<{ procs: SpawnedProcess[]; urls: string[] }> {
  const procs = await Promise.all(Array.from({ length: count }, (_, i) => spawnRouter(i, controllersOf(i))));
  cleanups.push(() => Promise.all(procs.map((r) => r.stop('SIGTERM', 10_000))));
  return { procs, urls: procs.map((r) => r.readyMatch?.[1] as string) };
}

/** What {@link startFleet} starts. */
export interface FleetOptions {
  /** Controller settings (e.g. {@link DEFAULT_TIMING}). */
  readonly timing: Record<string, string>;
  readonly agents: number;
  readonly routers: number;
  /** The first leader's settling window (the only setting shortened: before anything is measured). */
  readonly firstSettle: string;
  /** Replicas of the model (default: one per agent). */
  readonly replicas?: number;
  /** Fake GPUs per agent (default 1). */
  readonly gpusPerAgent?: number;
  /**
   * The database: `url` the controllers use (a proxy, say) and `direct`, the one the harness
   * reads (default: a new database on the machine's PostgreSQL, both the same).
   */
  readonly database?: { readonly url: string; readonly direct: string };
  /** Controller B runs as a process too (default: in this process, so a test can look inside it). */
  readonly standbyProcess?: boolean;
}

/** A fleet {@link startFleet} started. */
export interface Fleet {
  readonly root: string;
  /** The store, read directly (not through a proxy the controllers may use). */
  readonly store: Awaited<ReturnType<typeof openStore>>;
  /** A's and B's gRPC addresses. */
  readonly a: string;
  readonly b: string;
  /** A: the first leader, a process. */
  readonly leader: ControllerProcess;
  /** B: the standby, in this process (unless `standbyProcess`). */
  readonly standby: TestController | undefined;
  /** B as a process (with `standbyProcess`). */
  readonly standbyProc: ControllerProcess | undefined;
  /** The environment both controllers run with (to start one again). */
  readonly controllerEnv: Record<string, string>;
  readonly nodes: readonly string[];
  readonly agents: readonly SpawnedProcess[];
  /** Base URLs of the routers, and their processes. */
  readonly routers: readonly string[];
  readonly routerProcs: readonly SpawnedProcess[];
}

/**
 * Controller A (a process) leading and B standing by, `agents` real agents with `gpusPerAgent`
 * fake GPUs each and the agent's default reconnect settings, `routers` router processes knowing
 * both controllers (in alternating order), and a least-load model `tiny` on the simulator;
 * resolves once every replica is ready. Least-load: clients that send one prompt would stay on
 * one replica under prefix affinity (the default for chat), and these fleets measure balance.
 */
export async function startFleet(options: FleetOptions, cleanups: Cleanups): Promise<Fleet> {
  const { timing, agents, routers, firstSettle } = options;
  const replicas = options.replicas ?? agents;
  const root = mkdtempSync(join(tmpdir(), 'llmgw-ha-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const weights = join(root, 'tiny.gguf');
  writeFileSync(weights, 'not really weights: the simulator does not read them');
  const file = catalogFile({ models: [{ name: 'tiny', source: `file://${weights}`, size: '1MB', replicas, routing: { policy: 'least-load' }, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }] }] });
  cleanups.push(() => file.cleanup());
  let database = options.database;
  if (database === undefined) {
    const db = await postgresBackend.create();
    cleanups.push(() => db.drop());
    database = { url: db.url, direct: db.url };
  }
  const store = await openStore(database.direct);
  cleanups.push(() => store.close());
  const [pa, pb] = [await freePort(), await freePort()];
  const [a, b] = [`127.0.0.1:${pa}`, `127.0.0.1:${pb}`];
  const controllerEnv = { ...timing, LLMGW_CONTROLLER_LEASE: 'controller', LLMGW_DATABASE_URL: database.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_DATA_DIR: root };

  // 1. Controller A, a process, leads; then standby B starts.
  const leader = await spawnController('llmgw-controller A', pa, { ...controllerEnv, LLMGW_CONTROLLER_SETTLE: firstSettle });
  cleanups.push(() => leader.proc.kill9());
  await waitFor(
    async () => {
      const row = await store.leases.get('controller');
      return row?.held === true && parseOwner(row.owner).address === a;
    },
    { deadlineMs: 30_000, message: 'A leads' },
  );
  let standby: TestController | undefined;
  let standbyProc: ControllerProcess | undefined;
  if (options.standbyProcess) {
    standbyProc = await spawnController('llmgw-controller B', pb, controllerEnv);
    cleanups.push(() => standbyProc?.proc.kill9());
  } else {
    const s = await startController({ ...controllerEnv, LLMGW_CONTROLLER_GRPC_PORT: String(pb), LLMGW_CONTROLLER_ADVERTISE_ADDRESS: b });
    cleanups.push(() => s.close());
    if (s.plane.leadership.isLeader()) throw new Error('B leads at its start: A should');
    standby = s;
  }

  // 2. Agents and routers, each knowing both controllers (agents at their default reconnect settings).
  const nodes = Array.from({ length: agents }, (_, i) => `node-${i + 1}`);
  const agentEnv = { LLMGW_AGENT_FAKE_GPUS: `${options.gpusPerAgent ?? 1}xH100-80GB`, LLMGW_AGENT_RECONNECT_MIN: '500ms', LLMGW_AGENT_RECONNECT_MAX: '30s' };
  // Engines outlive their agent by design (detached), so stopping or killing an agent leaves its
  // engines running; they are ended after the agents, by the fleet's directory in their argv.
  cleanups.push(() => void killProcessesMentioning(root));
  const agentProcs = await Promise.all(nodes.map((id) => startAgent(id, `${a},${b}`, root, { env: agentEnv })));
  cleanups.push(() => Promise.all(agentProcs.map((x) => x.stop('SIGTERM', 10_000))));
  const started = await spawnRouters(routers, (i) => (i % 2 === 0 ? `${b},${a}` : `${a},${b}`), cleanups);
  await waitFor(async () => (await store.replicas.list()).filter((r) => r.state === 'ready').length === replicas, { deadlineMs: 120_000, message: `${replicas} ready replicas` });
  return { root, store, a, b, leader, standby, standbyProc, controllerEnv, nodes, agents: agentProcs, routers: started.urls, routerProcs: started.procs };
}

/** The router's `controller` readiness detail (see the router README). */
export async function controllerCheck(router: string): Promise<Record<string, unknown>> {
  return ((await (await fetch(`${router}/readyz`)).json()) as { checks: Record<string, { detail: Record<string, unknown> }> }).checks['controller'].detail;
}

/** A chat completion request body for model `tiny`. */
export const chatBody = (stream: boolean): string => JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: stream ? 32 : 4, stream });

/** Requests the routers sent to each replica so far (`llmgw_router_endpoint_choices_total`, summed over routers). */
export async function choicesByReplica(routers: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const r of routers) {
    const text = await (await fetch(`${r}/metrics`)).text();
    for (const m of text.matchAll(/^llmgw_router_endpoint_choices_total\{[^}]*endpoint="([^"]+)"[^}]*\} (\S+)$/gm)) out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[2]));
  }
  return out;
}

/** A controller as its admin API shows it: leading or not, its phase, and the start/stop commands it sent (its metrics). */
export interface ControllerView {
  readonly leader: boolean;
  readonly phase: string;
  readonly startReplica: number;
  readonly stopReplica: number;
}

/** Reads {@link ControllerView} from a controller's HTTP port; undefined when it does not answer. */
export async function controllerView(http: string): Promise<ControllerView | undefined> {
  try {
    const status = (await (await fetch(`${http}/v1/admin/status`, { signal: AbortSignal.timeout(5_000) })).json()) as { controller: { leader: boolean; phase: string } };
    const metrics = await (await fetch(`${http}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    const sent = (kind: string): number => Number(new RegExp(`^llmgw_controller_agent_commands_total\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? 0);
    return { leader: status.controller.leader, phase: status.controller.phase, startReplica: sent('startReplica'), stopReplica: sent('stopReplica') };
  } catch {
    return undefined;
  }
}

/** The replicas as a controller's admin API lists them (id, state, restarts, url). */
export async function replicasOf(http: string): Promise<{ id: string; state: string; restarts: number; url?: string }[]> {
  const body = (await (await fetch(`${http}/v1/admin/replicas`, { signal: AbortSignal.timeout(5_000) })).json()) as { replicas: { id: string; state: string; restarts: number; url?: string }[] };
  return body.replicas.map(({ id, state, restarts, url }) => ({ id, state, restarts, ...(url !== undefined ? { url } : {}) }));
}

/** The nodes a controller's admin API says have an agent stream to it. */
export async function connectedNodes(http: string): Promise<string[]> {
  const body = (await (await fetch(`${http}/v1/admin/nodes`, { signal: AbortSignal.timeout(5_000) })).json()) as { nodes: { id: string; connected: boolean }[] };
  return body.nodes.filter((n) => n.connected).map((n) => n.id);
}
