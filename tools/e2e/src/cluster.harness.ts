// Starts llmgw's apps as real processes on free ports in a temporary data directory, for the
// end-to-end tests and the failover benchmark; stops every one of them and everything they
// started (engines included) afterwards.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, inheritedTestEnv, runTsEntry, spawnProcess, waitFor, type SpawnedProcess } from '@llmgw/testing';
import { ProcessTreeTracker, readProcessTable, type ProcInfo } from '../../launcher/src/process-tree';
import type { NodeView, ReplicaView } from './admin.types';

/** Booting Nest through SWC on two busy cores takes several seconds per app. */
export const BOOT_DEADLINE_MS = 90_000;

/** The agent settings these tests use, by the names the agent reads them. */
export const AGENT_ENV = {
  controllers: 'LLMGW_AGENT_CONTROLLERS',
  fakeGpus: 'LLMGW_AGENT_FAKE_GPUS',
  cacheDir: 'LLMGW_AGENT_CACHE_DIR',
  /** `sim`: run tools/sim-engine in place of every engine. */
  engineOverride: 'LLMGW_AGENT_ENGINE_OVERRIDE',
  llamaServer: 'LLMGW_AGENT_LLAMA_SERVER',
} as const;

/** A started app: its process and the base URL of its HTTP listener. */
export interface AppHandle {
  readonly name: string;
  readonly proc: SpawnedProcess;
  readonly url: string;
}

/** A started agent, with the folder it keeps its state in. */
export interface AgentHandle extends AppHandle {
  readonly dataDir: string;
}

/** This process's environment without any LLMGW_* setting, so the developer's shell cannot leak in (but with the test PKI's gRPC TLS files). */
export function baseEnv(): Record<string, string | undefined> {
  return inheritedTestEnv();
}

/** This process's environment without any LLMGW_* setting at all: for `npm start`, which makes its own certificates. */
export function launcherEnv(): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('LLMGW_')));
}

/** The /proc/<pid>/cmdline of a process as argv; empty when it is gone. */
export function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * One cluster: a temporary data directory, a controller whose gRPC port is known before the
 * others start, and any number of routers, catalog APIs and agents. {@link stop} stops them all
 * (SIGTERM, then SIGKILL) and kills whatever they left running, tracked through /proc.
 */
export class TestCluster {
  readonly dataDir = mkdtempSync(join(tmpdir(), 'llmgw-e2e-'));
  readonly tracker = new ProcessTreeTracker();
  readonly apps: AppHandle[] = [];
  controller: AppHandle | undefined;
  grpcAddress = '';
  /** The tokens every app of this cluster is given: agents join with one, routers watch with the other. */
  readonly joinToken = randomBytes(24).toString('hex');
  readonly routerToken = randomBytes(24).toString('hex');
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.#timer = setInterval(() => this.tracker.refresh(), 250);
    this.#timer.unref();
  }

  /** Writes `text` to `name` in the data directory; returns its path. */
  writeFile(name: string, text: string | Buffer): string {
    const path = join(this.dataDir, name);
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
    return path;
  }

  async startController(env: Record<string, string> = {}): Promise<AppHandle> {
    const grpcPort = await freePort();
    this.grpcAddress = `127.0.0.1:${grpcPort}`;
    this.controller = await this.start('controller', 'controller', {
      LLMGW_CONTROLLER_PORT: '0',
      LLMGW_CONTROLLER_GRPC_PORT: String(grpcPort),
      LLMGW_CONTROLLER_JOIN_TOKEN: this.joinToken,
      LLMGW_CONTROLLER_ROUTER_TOKEN: this.routerToken,
      ...env,
    });
    return this.controller;
  }

  startRouter(env: Record<string, string> = {}): Promise<AppHandle> {
    return this.start('router', 'router', { LLMGW_ROUTER_PORT: '0', LLMGW_ROUTER_CONTROLLER: this.grpcAddress, LLMGW_ROUTER_CONTROLLER_TOKEN: this.routerToken, ...env });
  }

  startCatalog(env: Record<string, string> = {}): Promise<AppHandle> {
    return this.start('catalog', 'catalog', { LLMGW_CATALOG_PORT: '0', LLMGW_CATALOG_ADMIN_TOKEN: 'e2e-admin-token-0123456789', ...env });
  }

  /** An agent with its own data directory (state in `<it>/agent`) and cache: two agents on one machine must not share a node id. */
  async startAgent(name: string, env: Record<string, string> = {}): Promise<AgentHandle> {
    const dataDir = join(this.dataDir, name);
    mkdirSync(dataDir, { recursive: true });
    const app = await this.start('agent', name, {
      LLMGW_AGENT_PORT: '0',
      LLMGW_DATA_DIR: dataDir,
      [AGENT_ENV.cacheDir]: join(dataDir, 'cache'),
      [AGENT_ENV.controllers]: this.grpcAddress,
      LLMGW_AGENT_JOIN_TOKEN: this.joinToken,
      // The tests' weights live in the cluster's data directory: allowed explicitly, nothing else.
      LLMGW_AGENT_SOURCE_DIRS: this.dataDir,
      ...env,
    });
    return { ...app, dataDir };
  }

  /** GET a controller admin API path (loopback needs no token), parsed. */
  async admin<T>(path: string): Promise<T> {
    if (!this.controller) throw new Error('no controller started');
    const res = await fetch(`${this.controller.url}/v1/admin/${path}`, { signal: AbortSignal.timeout(5_000) });
    if (!res.ok) throw new Error(`GET /v1/admin/${path} answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as T;
  }

  replicas(model?: string): Promise<ReplicaView[]> {
    return this.admin<{ replicas: ReplicaView[] }>(`replicas${model ? `?model=${encodeURIComponent(model)}` : ''}`).then((r) => r.replicas);
  }

  nodes(): Promise<NodeView[]> {
    return this.admin<{ nodes: NodeView[] }>('nodes').then((r) => r.nodes);
  }

  /** Processes below `app` right now (its engines, while it lives). */
  descendants(app: AppHandle): ProcInfo[] {
    const table = readProcessTable();
    const out: ProcInfo[] = [];
    const queue = [app.proc.pid];
    while (queue.length > 0) {
      const pid = queue.shift() as number;
      for (const info of table.values()) {
        if (info.ppid === pid) {
          out.push(info);
          queue.push(info.pid);
        }
      }
    }
    return out;
  }

  /**
   * Stops every app (SIGTERM to its group, SIGKILL after `graceMs`), then SIGKILLs anything they
   * started that still runs; returns those leftovers (normally none) and removes the data dir.
   */
  async stop(graceMs = 10_000): Promise<ProcInfo[]> {
    clearInterval(this.#timer);
    this.tracker.refresh();
    await Promise.all(this.apps.map((app) => app.proc.stop('SIGTERM', graceMs)));
    const roots = new Set(this.apps.map((a) => a.proc.pid));
    const left = this.tracker.alive().filter((p) => !roots.has(p.pid));
    this.tracker.signalAll('SIGKILL');
    await waitFor(() => this.tracker.alive().length === 0, { deadlineMs: 5_000, message: 'leftover processes to die' }).catch(() => undefined);
    rmSync(this.dataDir, { recursive: true, force: true });
    return left;
  }

  private async start(app: string, name: string, env: Record<string, string>): Promise<AppHandle> {
    const proc = await spawnProcess({
      ...runTsEntry(`apps/${app}/src/main.ts`),
      name,
      cleanEnv: true,
      env: { ...baseEnv(), LLMGW_DATA_DIR: this.dataDir, LLMGW_LOG_LEVEL: 'info', ...env },
      readyWhen: { stdoutMatch: new RegExp(`llmgw-${app} listening on (http://127\\.0\\.0\\.1:\\d+)`) },
      deadlineMs: BOOT_DEADLINE_MS,
    });
    this.tracker.addRoot(proc.pid);
    const handle = { name, proc, url: proc.readyMatch?.[1] ?? '' };
    this.apps.push(handle);
    return handle;
  }
}

/** The last `lines` lines of every app's output, for a failure message. */
export function describeCluster(cluster: TestCluster, lines = 30): string {
  return cluster.apps
    .map((a) => `--- ${a.name} ---\n${(a.proc.stdout + a.proc.stderr).split('\n').slice(-lines).join('\n')}`)
    .join('\n');
}

/** A directory standing in for a model's weights (sim-engine never reads them). */
export function fakeWeightsDir(cluster: TestCluster, name: string): string {
  const dir = join(cluster.dataDir, 'weights', name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), '{}\n');
  return dir;
}
