// Control-plane benchmark: the real llmgw-controller process against a simulated fleet of 2,000
// nodes × 8 GPUs (agents over real gRPC, in a child process) and 1,000 models, with 100 routers
// watching endpoint snapshots. Measures the first reconcile pass (placing every replica),
// steady-state reconcile passes, snapshot fan-out latency to the routers, the controller's
// event-loop delay and its RSS, against the targets: pass ≤ 50 ms, fan-out p99 ≤ 100 ms,
// event-loop delay p99 at steady state ≤ 20 ms, RSS ≤ 400 MB.
// Usage: node tools/run.cjs tools/bench/control-plane.bench.ts [--nodes N] [--models N]
//          [--routers N] [--flips N] [--steady-seconds N] [--source] [--plaintext] [--node-flags="..."]
//          [--no-write]
// The controller runs built (`nx build controller`, plain `node dist/apps/controller/main.js`),
// as it ships; --source runs it from TypeScript through tools/run.cjs instead, for comparison.
// The built controller gets the Node flags its image sets (NODE_OPTIONS in
// deploy/container/controller.Dockerfile: V8's heap sizes); --node-flags="..." replaces them
// (--node-flags= runs it with none, the heap Node sizes from this machine); the report names them.
// Writes its section of docs/benchmarks.md unless --no-write. The fleet child is this same file
// run with --role fleet.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { inflateRawSync } from 'node:zlib';
import { Client, Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import {
  AgentServiceClient,
  EndpointSnapshot,
  ReplicaState,
  WatchRequest,
  WatchResponse,
  type CacheEntry,
  type ConnectRequest,
  type ConnectResponse,
  type StartReplica,
} from '@llmgw/proto';
import { openStore } from '@llmgw/store';
import { testChannelCredentials, useTestPki } from '@llmgw/testing';
import { dockerEnv, dockerInstructions } from '../scripts/deploy-checks';
import { machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const GB = 1e9;
const ROOT = resolve(__dirname, '..', '..');
const FABRIC_SIZE = 100;

// ---------------------------------------------------------------- the simulated agent

/** A minimal agent: registers 8 fake H100s, heartbeats, and "runs" replicas by reporting them ready. */
class BenchAgent {
  private call: ClientDuplexStream<ConnectRequest, ConnectResponse> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly cache: CacheEntry[] = [];
  private cacheChanged = false;
  readonly replicas = new Map<string, { spec: StartReplica; state: ReplicaState; port: number; rendezvousPort?: number }>();
  welcomed = false;
  private static port = 30_000;

  constructor(
    readonly nodeId: string,
    private readonly index: number,
    private readonly client: AgentServiceClient,
  ) {}

  connect(): void {
    const call = this.client.connect(new Metadata());
    this.call = call;
    call.on('data', (res: ConnectResponse) => this.onMessage(res));
    call.on('error', () => undefined);
    call.on('status', () => clearInterval(this.timer));
    call.write({ payload: { $case: 'register', value: this.register() } });
  }

  close(): void {
    clearInterval(this.timer);
    this.call?.cancel();
  }

  /** Reports one replica in a new state (the fan-out trigger). */
  setState(replicaId: string, state: ReplicaState): void {
    const r = this.replicas.get(replicaId);
    if (!r) return;
    r.state = state;
    this.send({ $case: 'replicaStatus', value: { replicaId, state, port: r.port, lastLogLines: [], restarts: 0 } });
  }

  private register() {
    return {
      nodeId: this.nodeId,
      address: `10.${(this.index >> 16) & 255}.${(this.index >> 8) & 255}.${this.index & 255}`,
      labels: { rack: `r${Math.floor(this.index / 40)}` },
      fabric: `fabric-${Math.floor(this.index / FABRIC_SIZE)}`,
      gpus: Array.from({ length: 8 }, (_, i) => ({
        index: i,
        uuid: `GPU-${this.nodeId}-${i}`,
        name: 'NVIDIA H100 80GB HBM3',
        gpuClass: 'H100-80GB',
        memoryTotalBytes: 80 * GB,
        memoryUsedBytes: 1 * GB,
        utilizationPct: 0,
        temperatureC: 35,
        eccErrors: 0,
        healthy: true,
      })),
      cpuCores: 128,
      memoryBytes: 2048 * GB,
      cache: { dir: '/var/cache/llmgw', totalBytes: 4000 * GB, freeBytes: 3500 * GB, entries: [] },
      replicas: [],
      agentVersion: 'bench',
    };
  }

  private heartbeat(): void {
    const listing = this.cacheChanged ? { cacheListing: { entries: [...this.cache] } } : {};
    this.cacheChanged = false;
    this.send({
      $case: 'heartbeat',
      value: {
        gpus: Array.from({ length: 8 }, (_, i) => ({ index: i, memoryUsedBytes: 1 * GB, utilizationPct: 0, temperatureC: 35, eccErrors: 0, healthy: true })),
        cacheFreeBytes: 3500 * GB,
        replicas: [...this.replicas.entries()].map(([replicaId, r]) => ({
          replicaId,
          model: r.spec.model,
          engine: r.spec.engine,
          state: r.state,
          port: r.port,
          ...(r.rendezvousPort !== undefined && { rendezvousPort: r.rendezvousPort }),
          gpuIndices: [...r.spec.gpuIndices],
          rank: r.spec.rank,
          restarts: 0,
        })),
        ...listing,
      },
    });
  }

  private send(payload: ConnectRequest['payload']): void {
    this.call?.write({ payload });
  }

  private onMessage(res: ConnectResponse): void {
    const p = res.payload;
    if (!p) return;
    switch (p.$case) {
      case 'welcome': {
        this.welcomed = true;
        const every = p.value.heartbeatIntervalMs;
        // Spread the fleet's heartbeats over the interval, as real agents started at different times would.
        setTimeout(() => {
          this.heartbeat();
          this.timer = setInterval(() => this.heartbeat(), every);
        }, Math.random() * every);
        return;
      }
      case 'fetchWeights':
        this.cache.push({ name: p.value.cacheName, sizeBytes: p.value.sizeBytes ?? 1, modifiedUnixMs: Date.now() });
        this.cacheChanged = true;
        this.send({ $case: 'commandResult', value: { commandId: p.value.commandId, ok: true, message: '', paths: [] } });
        return;
      case 'startReplica': {
        const known = this.replicas.get(p.value.replicaId);
        // A multi-node rank 0 picks the rendezvous port, as a real agent does; the others wait for it.
        const picksRendezvous = p.value.rank === 0 && p.value.members.length > 1;
        const r = known ?? { spec: p.value, state: ReplicaState.REPLICA_STATE_READY, port: BenchAgent.port++, ...(picksRendezvous && { rendezvousPort: BenchAgent.port++ }) };
        this.replicas.set(p.value.replicaId, r);
        this.send({ $case: 'commandResult', value: { commandId: p.value.commandId, ok: true, message: '', paths: [] } });
        this.send({ $case: 'replicaStatus', value: { replicaId: p.value.replicaId, state: r.state, port: r.port, ...(r.rendezvousPort !== undefined && { rendezvousPort: r.rendezvousPort }), lastLogLines: [], restarts: 0 } });
        return;
      }
      case 'stopReplica':
        this.replicas.delete(p.value.replicaId);
        this.send({ $case: 'commandResult', value: { commandId: p.value.commandId, ok: true, message: '', paths: [] } });
        this.send({ $case: 'replicaStatus', value: { replicaId: p.value.replicaId, state: ReplicaState.REPLICA_STATE_STOPPED, lastLogLines: [], restarts: 0 } });
        return;
      case 'collectWeights':
        this.send({ $case: 'commandResult', value: { commandId: p.value.commandId, ok: true, message: '', paths: [] } });
        return;
    }
  }
}

/** Agents `from`..`to`-1, sharing one gRPC channel per 50 agents. */
function startAgents(address: string, from: number, to: number): BenchAgent[] {
  const agents: BenchAgent[] = [];
  let client: AgentServiceClient | undefined;
  for (let i = from; i < to; i++) {
    if ((i - from) % 50 === 0) client = new AgentServiceClient(address, testChannelCredentials(), { 'grpc.use_local_subchannel_pool': 1 });
    const agent = new BenchAgent(nodeId(i), i, client as AgentServiceClient);
    agents.push(agent);
    agent.connect();
  }
  return agents;
}

function nodeId(i: number): string {
  return `node-${String(i).padStart(4, '0')}`;
}

/** The fleet child: runs agents until stdin closes, printing `welcomed N` as they are accepted. */
async function fleetMain(address: string, from: number, to: number): Promise<void> {
  const agents = startAgents(address, from, to);
  let last = -1;
  const timer = setInterval(() => {
    const n = agents.filter((a) => a.welcomed).length;
    if (n !== last) process.stdout.write(`welcomed ${n}\n`);
    last = n;
  }, 250);
  await new Promise<void>((done) => process.stdin.on('end', done).resume());
  clearInterval(timer);
  for (const a of agents) a.close();
  process.exit(0);
}

// ---------------------------------------------------------------- watching routers

/**
 * A router reading Watch as raw bytes (no decoding), recording when each revision arrived. It asks
 * for compressed snapshots, as real routers do, and reads the revision without inflating.
 */
class RawWatcher {
  readonly arrivals = new Map<number, number>();
  latest = 0;
  /** The last message as received (an encoded WatchResponse). */
  last: Buffer | undefined;
  private readonly client: Client;

  constructor(address: string, id: number, windowBytes?: number) {
    this.client = new Client(address, testChannelCredentials(), {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.max_receive_message_length': 256 * 1024 * 1024,
      ...(windowBytes !== undefined ? { 'grpc-node.flow_control_window': windowBytes } : {}),
    });
    const call = this.client.makeServerStreamRequest(
      '/llmgw.v1.RouterService/Watch',
      (r: WatchRequest) => Buffer.from(WatchRequest.encode(r).finish()),
      (b: Buffer) => b,
      { routerId: `bench-router-${id}`, acceptCompressed: true },
    );
    call.on('data', (buf: Buffer) => {
      const revision = revisionOf(buf);
      this.last = buf;
      this.arrivals.set(revision, performance.now());
      this.latest = Math.max(this.latest, revision);
    });
    call.on('error', () => undefined);
  }

  close(): void {
    this.client.close();
  }
}

/**
 * The snapshot revision of an encoded WatchResponse: field 1 (snapshot) or field 2 (compressed),
 * then its field 1 (varint).
 */
function revisionOf(buf: Buffer): number {
  let pos = 0;
  const varint = (): number => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = buf[pos++];
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
      shift += 7;
    }
  };
  const tag = buf[pos++];
  if (tag !== 0x0a && tag !== 0x12) return -1;
  varint(); // snapshot / compressed length
  if (buf[pos++] !== 0x08) return 0;
  return varint();
}

// ---------------------------------------------------------------- the fleet and catalog

/** 1,000 models in four shapes; every source is a distinct download. */
function catalogDocument(models: number): { models: unknown[] } {
  const out: unknown[] = [];
  for (let i = 0; i < models; i++) {
    const kind = i % 20;
    const base = { name: `model-${String(i).padStart(4, '0')}`, source: `hf://bench/model-${i}@main`, size: '10GB' };
    if (kind < 10) out.push({ ...base, replicas: 2, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 1 }] });
    else if (kind < 16) out.push({ ...base, replicas: 2, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 4, tensorParallel: 4 }] });
    else if (kind < 19) out.push({ ...base, replicas: 3, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 8, tensorParallel: 8 }] });
    else out.push({ ...base, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 8, nodes: 2, tensorParallel: 8, pipelineParallel: 2 }] });
  }
  return { models: out };
}

function wantedReplicas(models: number): number {
  let n = 0;
  for (let i = 0; i < models; i++) n += i % 20 < 16 ? 2 : i % 20 < 19 ? 3 : 1;
  return n;
}

// ---------------------------------------------------------------- orchestration

interface PassStats {
  at: number;
  actions: number;
  planMs: number;
  totalMs: number;
}

interface Status {
  controller: { phase: string; snapshotRevision?: number; lastPass?: PassStats; lastActivePass?: PassStats };
  nodes: { total: number; healthy: number };
  replicas: { total: number; byState: Record<string, number> };
  models: { total: number; satisfied: number; unplaceable: number };
}

/** A histogram's cumulative buckets, sum and count from Prometheus text. */
function histogram(text: string, name: string, label?: string): { buckets: [number, number][]; sum: number; count: number } {
  const buckets: [number, number][] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}_bucket{`) || (label !== undefined && !line.includes(label))) continue;
    const m = /le="([^"]+)"\} (\S+)$|le="([^"]+)",[^}]*\} (\S+)$/.exec(line);
    if (!m) continue;
    const le = m[1] ?? m[3];
    buckets.push([le === '+Inf' ? Infinity : Number(le), Number(m[2] ?? m[4])]);
  }
  const value = (suffix: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}_${suffix}`) && (label === undefined || l.includes(label)));
    // A labelled series appears only once observed: absent means none yet.
    return line === undefined ? 0 : Number(line.split(' ').pop());
  };
  return { buckets, sum: value('sum'), count: value('count') };
}

/** Mean and the bucket bound holding the 99th percentile of what was observed between two readings. */
/** The value of an unlabelled sample `name` in Prometheus text, or NaN. */
function sampleValue(text: string, name: string): number {
  const m = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

/** prom-client's default `monitorEventLoopDelay` resolution: its timer fires every 10 ms. */
const LOOP_RESOLUTION_MS = 10;

/**
 * The controller's event-loop delay since the previous scrape, from prom-client's default
 * gauges: they read a `perf_hooks.monitorEventLoopDelay` histogram and reset it on every scrape,
 * so a window is the time between two /metrics reads. The histogram records the interval
 * between its timer's runs, so an idle loop reads 10 ms; the delay is that interval less the
 * resolution (a constant, so it comes off the percentiles exactly).
 */
function eventLoopDelay(text: string): { p99Ms: number; maxMs: number } {
  const ms = (name: string) => Math.max(0, sampleValue(text, name) * 1000 - LOOP_RESOLUTION_MS);
  return { p99Ms: ms('nodejs_eventloop_lag_p99_seconds'), maxMs: ms('nodejs_eventloop_lag_max_seconds') };
}

function histogramDelta(a: ReturnType<typeof histogram>, b: ReturnType<typeof histogram>): { count: number; meanMs: number; p99BoundMs: number } {
  const count = b.count - a.count;
  const meanMs = ((b.sum - a.sum) / count) * 1000;
  let p99BoundMs = Infinity;
  for (let i = 0; i < b.buckets.length; i++) {
    if (b.buckets[i][1] - (a.buckets[i]?.[1] ?? 0) >= 0.99 * count) {
      p99BoundMs = b.buckets[i][0] * 1000;
      break;
    }
  }
  return { count, meanMs, p99BoundMs };
}

/** Resident bytes now and at peak, and how much of now is file-backed (the node binary, native addons) and anonymous. */
function rssOf(pid: number): { rss: number; peak: number; file: number; anon: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM'), file: kb('RssFile'), anon: kb('RssAnon') };
}

async function until<T>(what: string, deadlineMs: number, fn: () => Promise<T | undefined> | T | undefined, everyMs = 100): Promise<T> {
  const end = performance.now() + deadlineMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function children(): ChildProcess[] {
  return live;
}
const live: ChildProcess[] = [];

function spawnTs(file: string, args: string[], env: Record<string, string>, nodeFlags: string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...nodeFlags, join(ROOT, 'tools', 'run.cjs'), join(ROOT, file), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.push(child);
  return child;
}

/** NODE_OPTIONS as the controller's image sets it (deploy/container/controller.Dockerfile). */
function controllerImageNodeOptions(): string {
  return dockerEnv(dockerInstructions(readFileSync(join(ROOT, 'deploy', 'container', 'controller.Dockerfile'), 'utf8')))['NODE_OPTIONS'] ?? '';
}

function spawnBuilt(file: string, env: Record<string, string>, nodeFlags: string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...nodeFlags, join(ROOT, file)], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  live.push(child);
  return child;
}

function lines(child: ChildProcess, onLine: (line: string) => void): void {
  let buf = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    if (err.length > 20_000) err = err.slice(-20_000);
  });
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null && err) process.stderr.write(`child exited ${code}:\n${err}\n`);
  });
}

/**
 * What a router pays for one received Watch message after receipt, `runs` times: inflating
 * `compressed.deflate` and decoding the EndpointSnapshot (ms each run), and the size of the same
 * snapshot as a plain `WatchResponse{snapshot}` (bytes).
 */
function timeReceipt(message: Buffer, runs: number): { inflate: number[]; total: number[]; plainBytes: number } {
  const compressed = WatchResponse.decode(message).compressed;
  if (compressed === undefined) throw new Error('the controller sent a plain snapshot to a watcher that asked for compression');
  const inflate: number[] = [];
  const total: number[] = [];
  let snapshot: EndpointSnapshot | undefined;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const bytes = inflateRawSync(compressed.deflate);
    const t1 = performance.now();
    snapshot = EndpointSnapshot.decode(bytes);
    const t2 = performance.now();
    inflate.push(t1 - t0);
    total.push(t2 - t0);
  }
  return { inflate, total, plainBytes: WatchResponse.encode({ snapshot }).finish().length };
}

const fmtBytes = (n: number) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e3).toFixed(0)} kB`);
const fmt = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      role: { type: 'string', default: 'bench' },
      controller: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      nodes: { type: 'string', default: '2000' },
      models: { type: 'string', default: '1000' },
      routers: { type: 'string', default: '100' },
      flips: { type: 'string', default: '30' },
      'steady-seconds': { type: 'string', default: '20' },
      'no-write': { type: 'boolean', default: false },
      source: { type: 'boolean', default: false },
      plaintext: { type: 'boolean', default: false },
      'node-flags': { type: 'string' },
      window: { type: 'string' },
    },
  });
  if (values.role === 'fleet') return fleetMain(values.controller as string, Number(values.from), Number(values.to));

  const NODES = Number(values.nodes);
  const MODELS = Number(values.models);
  const ROUTERS = Number(values.routers);
  const FLIPS = Number(values.flips);
  const STEADY_MS = Number(values['steady-seconds']) * 1000;
  const load0 = os.loadavg()[0];
  const dir = mkdtempSync(join(os.tmpdir(), 'llmgw-bench-cp-'));
  // gRPC over TLS as deployed (a throw-away PKI; the fleet child and the routers here trust it),
  // or in plaintext with --plaintext, to see what TLS costs.
  const plaintext = values.plaintext === true;
  const pki = plaintext ? undefined : await useTestPki();
  if (plaintext) process.env.LLMGW_GRPC_INSECURE = 'true';
  const cleanup = () => {
    for (const c of children()) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    if (pki) rmSync(pki.dir, { recursive: true, force: true });
  };
  process.on('exit', cleanup);

  // 1. A store that knows the fleet and the catalog, as after an earlier run: the controller
  //    then settles as soon as every node is back, and its first pass places everything.
  const url = `sqlite:${join(dir, 'llmgw.db')}`;
  const store = await openStore(url);
  await store.catalog.put(catalogDocument(MODELS), 'bench');
  const seeded = Date.now();
  for (let i = 0; i < NODES; i++) {
    await store.nodes.upsert({
      id: nodeId(i),
      address: '0.0.0.0',
      labels: {},
      gpus: [],
      cpuCores: 1,
      memoryBytes: 1,
      cache: { dir: '/', totalBytes: 0, freeBytes: 0, entries: [] },
      state: 'healthy',
      cordoned: false,
      lastSeen: seeded,
    });
  }
  await store.close();
  const wanted = wantedReplicas(MODELS);
  process.stdout.write(`store seeded: ${NODES} nodes, ${MODELS} models (${wanted} replicas wanted)\n`);

  // 2. The controller, as a process: built, as it ships, unless --source.
  const fromSource = values.source === true;
  if (!fromSource) {
    const build = spawnSync(join(ROOT, 'node_modules', '.bin', 'nx'), ['build', 'controller'], { cwd: ROOT, env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' }, stdio: 'inherit' });
    if (build.status !== 0) throw new Error('nx build controller failed');
  }
  const controllerEnv = {
    LLMGW_DATA_DIR: dir,
    LLMGW_CONTROLLER_PORT: '0',
    LLMGW_CONTROLLER_GRPC_PORT: '0',
    LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true',
    LLMGW_LOG_LEVEL: 'info',
    LLMGW_CONTROLLER_SETTLE: '10m',
    LLMGW_CONTROLLER_TICK: '1s',
    LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '5s',
    LLMGW_CONTROLLER_UNREACHABLE_AFTER: '60s',
    LLMGW_CONTROLLER_LOST_AFTER: '5m',
  };
  const imageFlags = !fromSource && values['node-flags'] === undefined;
  const nodeFlags = (imageFlags ? controllerImageNodeOptions() : (values['node-flags'] ?? '')).split(/\s+/).filter((f) => f !== '');
  const controller = fromSource ? spawnTs('apps/controller/src/main.ts', [], controllerEnv, nodeFlags) : spawnBuilt('dist/apps/controller/main.js', controllerEnv, nodeFlags);
  let http = '';
  let grpc = '';
  lines(controller, (line) => {
    if (/"level":"(warn|error|fatal)"/.test(line)) process.stderr.write(`controller: ${line.slice(0, 400)}\n`);
    const h = /llmgw-controller listening on (http:\/\/[^"\s]+)/.exec(line);
    if (h) http = h[1];
    const g = /llmgw-controller gRPC listening on ([^"\s]+)/.exec(line);
    if (g) grpc = g[1];
  });
  await until('the controller to listen', 120_000, () => (http && grpc ? true : undefined));
  const status = async (): Promise<Status> => JSON.parse(await (await fetch(`${http}/v1/admin/status`)).text()) as Status;
  const rssIdle = rssOf(controller.pid as number);
  const metrics = async () => (await fetch(`${http}/metrics`)).text();
  await metrics(); // starts the first-pass event-loop window (each scrape resets it)

  // 3. The fleet: node-0000 here (it flips a replica for the fan-out test), the rest in a child.
  const started = performance.now();
  const fleet = spawnTs('tools/bench/control-plane.bench.ts', ['--role', 'fleet', '--controller', grpc, '--from', '1', '--to', String(NODES)], {}, ['--max-old-space-size=2048']);
  let welcomed = 0;
  lines(fleet, (line) => {
    const m = /^welcomed (\d+)$/.exec(line);
    if (m) welcomed = Number(m[1]);
  });
  const [flipper] = startAgents(grpc, 0, 1);
  const passes = new Map<number, PassStats>();
  let first: PassStats | undefined;
  const watchPasses = async (): Promise<Status> => {
    const s = await status();
    if (s.controller.lastPass) passes.set(s.controller.lastPass.at, s.controller.lastPass);
    // The pass that placed the fleet: the one with the most actions (it stays the last active
    // pass until something else changes, so polling cannot miss it).
    const active = s.controller.lastActivePass;
    if (active && (!first || active.actions > first.actions)) first = active;
    return s;
  };
  await until('every agent to be welcomed', 300_000, () => (welcomed + (flipper.welcomed ? 1 : 0) === NODES ? true : undefined), 100);
  const joinedMs = performance.now() - started;
  process.stdout.write(`${NODES} agents connected in ${fmt(joinedMs)} ms\n`);
  const converged = await until('every replica ready', 600_000, async () => {
    const s = await watchPasses();
    return (s.replicas.byState.ready ?? 0) >= wanted ? s : undefined;
  }, 250);
  const convergeMs = performance.now() - started;
  const loopFirst = eventLoopDelay(await metrics());
  if (!first) throw new Error('no reconcile pass with actions was seen');
  process.stdout.write(`first pass: ${first.actions} actions, plan ${fmt(first.planMs)} ms, total ${fmt(first.totalMs)} ms; all ${converged.replicas.byState.ready} ready after ${fmt(convergeMs)} ms\n`);

  // 4. Steady state: passes run once a tick. The histogram covers every pass; the admin status
  //    is read once a second (reading it is work for the controller too) for exact figures.
  const steadyMetrics = await metrics(); // also starts the steady event-loop window
  const passesBefore = histogram(steadyMetrics, 'llmgw_controller_reconcile_duration_seconds');
  const gcBefore = histogram(steadyMetrics, 'nodejs_gc_duration_seconds', 'kind="major"');
  const steadyFrom = Date.now();
  await until('steady-state passes', STEADY_MS + 60_000, async () => {
    await watchPasses();
    return Date.now() - steadyFrom >= STEADY_MS ? true : undefined;
  }, 1_000);
  const steadyEndMetrics = await metrics();
  const passHist = histogramDelta(passesBefore, histogram(steadyEndMetrics, 'llmgw_controller_reconcile_duration_seconds'));
  const gcMajor = histogram(steadyEndMetrics, 'nodejs_gc_duration_seconds', 'kind="major"');
  const gcSteady = { count: gcMajor.count - gcBefore.count, ms: (gcMajor.sum - gcBefore.sum) * 1000 };
  const steady = [...passes.values()].filter((p) => p.at >= steadyFrom && p.actions === 0);
  const passTotal = steady.map((p) => p.totalMs);
  const passPlan = steady.map((p) => p.planMs);
  const loopSteady = eventLoopDelay(steadyEndMetrics);
  const rssSteady = rssOf(controller.pid as number);
  const heapTotal = sampleValue(steadyEndMetrics, 'nodejs_heap_size_total_bytes');

  // 5. Fan-out: routers watch; a replica flips starting ↔ ready; time from the report to each router's receipt.
  const windowBytes = values.window !== undefined ? Number(values.window) : undefined;
  const watchers = Array.from({ length: ROUTERS }, (_, i) => new RawWatcher(grpc, i, windowBytes));
  const current = (await status()).controller.snapshotRevision ?? 0;
  await until('every router to hold the current snapshot', 120_000, () => (watchers.every((w) => w.latest >= current) ? true : undefined), 50);
  const publishBefore = histogram(await metrics(), 'llmgw_controller_snapshot_publish_seconds');
  const flipId = [...flipper.replicas.keys()][0];
  const latencies: number[] = [];
  const worstPerFlip: number[] = [];
  if (flipId === undefined) throw new Error('node-0000 runs no replica to flip');
  for (let i = 0; i < FLIPS * 2; i++) {
    const before = Math.max(...watchers.map((w) => w.latest));
    const t0 = performance.now();
    flipper.setState(flipId, i % 2 === 0 ? ReplicaState.REPLICA_STATE_STARTING : ReplicaState.REPLICA_STATE_READY);
    await until(`revision after ${before} at every router`, 30_000, () => (watchers.every((w) => w.latest > before) ? true : undefined), 2);
    const got = watchers.map((w) => {
      const rev = [...w.arrivals.keys()].filter((r) => r > before).sort((a, b) => a - b)[0];
      return (w.arrivals.get(rev) as number) - t0;
    });
    latencies.push(...got);
    worstPerFlip.push(Math.max(...got));
    await new Promise((r) => setTimeout(r, 100));
  }
  const last = watchers[0].last as Buffer;
  const received = timeReceipt(last, 50);
  const publish = histogramDelta(publishBefore, histogram(await metrics(), 'llmgw_controller_snapshot_publish_seconds'));
  const rssEnd = rssOf(controller.pid as number);
  const load1 = os.loadavg()[0];
  for (const w of watchers) w.close();
  flipper.close();
  fleet.stdin?.end();
  controller.kill('SIGTERM');

  // 6. Report.
  const MB = 1e6;
  // The built controller must fit in 250 MB at this fleet size; from source the loader adds ~80 MB.
  const rssTarget = fromSource ? 400 : 250;
  const p = (xs: number[], q: number) => percentile(xs, q);
  const rows: string[][] = [
    ['measure', 'samples', 'median', 'p99', 'max', 'target', 'ratio to target'],
    ['reconcile pass, steady state (ms)', String(passTotal.length), fmt(p(passTotal, 50)), fmt(p(passTotal, 99)), fmt(Math.max(...passTotal)), '≤ 50', `${(p(passTotal, 99) / 50).toFixed(2)}× (p99)`],
    ['  of which planning (ms)', String(passPlan.length), fmt(p(passPlan, 50)), fmt(p(passPlan, 99)), fmt(Math.max(...passPlan)), '', ''],
    ['  every pass in the window, from the histogram (ms)', String(passHist.count), `${fmt(passHist.meanMs)} (mean)`, `≤ ${fmt(passHist.p99BoundMs)}`, '', '', ''],
    ['first pass: plan every placement (ms)', `${first.actions} actions`, fmt(first.planMs), '', '', '', `${fmt(first.planMs / first.actions)} ms per replica`],
    ['first pass: plan + store writes + commands (ms)', `${first.actions} actions`, fmt(first.totalMs), '', '', '', ''],
    ['snapshot fan-out to each router (ms)', String(latencies.length), fmt(p(latencies, 50)), fmt(p(latencies, 99)), fmt(Math.max(...latencies)), 'p99 ≤ 100', `${(p(latencies, 99) / 100).toFixed(2)}×`],
    ['  slowest router per change (ms)', String(worstPerFlip.length), fmt(p(worstPerFlip, 50)), fmt(p(worstPerFlip, 99)), fmt(Math.max(...worstPerFlip)), '', ''],
    ['  in the controller: build + write to every stream (ms)', String(publish.count), `${fmt(publish.meanMs)} (mean)`, `≤ ${fmt(publish.p99BoundMs)}`, '', '', ''],
    ['  at each router after receipt: inflate + decode one snapshot (ms)', String(received.total.length), fmt(p(received.total, 50)), fmt(p(received.total, 99)), fmt(Math.max(...received.total)), '', ''],
    ['    of which inflate (ms)', String(received.inflate.length), fmt(p(received.inflate, 50)), fmt(p(received.inflate, 99)), fmt(Math.max(...received.inflate)), '', ''],
    ['controller event-loop delay, agents joining + first pass until all ready (ms)', '1 window', '', fmt(loopFirst.p99Ms), fmt(loopFirst.maxMs), '', ''],
    ['controller event-loop delay, steady state (ms)', '1 window', '', fmt(loopSteady.p99Ms), fmt(loopSteady.maxMs), 'p99 ≤ 20', `${(loopSteady.p99Ms / 20).toFixed(2)}×`],
    ['controller RSS, steady (MB)', '1', fmt(rssSteady.rss / MB), '', fmt(rssEnd.peak / MB), `≤ ${rssTarget}`, `${(rssSteady.rss / MB / rssTarget).toFixed(2)}×`],
  ];
  printTable(rows);
  const rssLine = `RSS of the controller process (${fromSource ? 'Node with the TypeScript loader' : 'the built bundle on plain Node'}): ${fmt(rssIdle.rss / MB)} MB before the fleet, ${fmt(rssSteady.rss / MB)} MB at steady state, peak ${fmt(rssEnd.peak / MB)} MB. At steady state (read right after a /metrics scrape, as Prometheus would leave it): ${fmt(rssSteady.file / MB)} MB file-backed (the node binary and native addons${fromSource ? ", the loader's SWC binding among them" : ''}, shared with other processes), ${fmt(rssSteady.anon / MB)} MB anonymous, of which the JavaScript heap reserved ${fmt(heapTotal / MB)} MB (${fmt(sampleValue(steadyEndMetrics, 'nodejs_heap_size_used_bytes') / MB)} MB in use, live objects and garbage not yet collected); about ${fmt(Math.max(0, rssSteady.anon - heapTotal) / MB)} MB is native: buffers outside the heap (${fmt(sampleValue(steadyEndMetrics, 'nodejs_external_memory_bytes') / MB)} MB), the allocator's arenas (HTTP/2 sessions, SQLite, zlib), thread stacks.`;
  process.stdout.write(`${rssLine}\n`);

  if (values['no-write']) return;
  const flags = [fromSource ? '--source' : '', plaintext ? '--plaintext' : '', values['node-flags'] === undefined ? '' : `--node-flags="${nodeFlags.join(' ')}"`].filter(Boolean).join(' ');
  const md = [
    `Command: \`npm run bench:control-plane${flags ? ` -- ${flags}` : ''}\` (= \`node tools/run.cjs tools/bench/control-plane.bench.ts${flags ? ` ${flags}` : ''}\`); the controller ${fromSource ? 'runs from TypeScript through the SWC loader (tools/run.cjs)' : 'runs built: \`node dist/apps/controller/main.js\`, no TypeScript loader'}${nodeFlags.length > 0 ? `, with the Node flags ${nodeFlags.map((f) => `\`${f}\``).join(' ')}${imageFlags ? ' (NODE_OPTIONS of its image, deploy/container/controller.Dockerfile)' : ''}` : fromSource ? '' : ', with no Node flags (V8 sizes its heap from this machine)'}; gRPC ${plaintext ? 'in plaintext (LLMGW_GRPC_INSECURE=true)' : 'over TLS (an ECDSA P-256 certificate the agents and routers verify), as deployed'}.`,
    '',
    `Machine: ${machineLine(os.cpus(), os.totalmem())}.`,
    '',
    `- Fleet: ${NODES} nodes × 8 H100 (fabrics of ${FABRIC_SIZE}) as agents over real gRPC in a child process, heartbeating every 5 s; ${MODELS} models wanting ${wanted} replicas (1, 4, 8 GPUs and 2-node); the real \`llmgw-controller\` process on SQLite.`,
    `- Start: ${NODES} agents connected in ${fmt(joinedMs / 1000)} s; the first pass placed ${first.actions} replicas (planning ${fmt(first.planMs)} ms, ${fmt(first.planMs / first.actions)} ms per replica; with ${first.actions} fenced store writes and the fetch/start commands ${fmt(first.totalMs)} ms); all ready ${fmt(convergeMs / 1000)} s after the agents started connecting.`,
    `- Targets: steady-state pass p99 ≤ 50 ms — ${fmt(p(passTotal, 99))} ms, ${p(passTotal, 99) <= 50 ? 'met' : 'missed'}; fan-out p99 ≤ 100 ms — ${fmt(p(latencies, 99))} ms, ${p(latencies, 99) <= 100 ? 'met' : 'missed'}; event-loop delay p99 at steady state ≤ 20 ms — ${fmt(loopSteady.p99Ms)} ms, ${loopSteady.p99Ms <= 20 ? 'met' : 'missed'}; RSS ≤ ${rssTarget} MB${fromSource ? ' (from source)' : ' (built)'} — ${fmt(rssSteady.rss / MB)} MB, ${rssSteady.rss / MB <= rssTarget ? 'met' : 'missed'}.`,
    `- Event-loop delay of the controller (\`perf_hooks.monitorEventLoopDelay\` through prom-client's \`nodejs_eventloop_lag_*\` gauges, reset by each /metrics scrape; the delay is the interval between its 10 ms timer's runs less those 10 ms): p99 ${fmt(loopFirst.p99Ms)} ms, max ${fmt(loopFirst.maxMs)} ms from the moment the fleet starts connecting until every replica is ready (registrations, the first pass and its store writes); p99 ${fmt(loopSteady.p99Ms)} ms, max ${fmt(loopSteady.maxMs)} ms over the ${fmt(STEADY_MS / 1000)} s steady window (heartbeats, passes). The machine is shared with other work, so waiting for a core shows up here too.`,
    `- Fan-out: ${ROUTERS} routers on their own connections; a replica on node-0000 reported starting, then ready, ${FLIPS} times; latency is from the agent's report to each router's receipt of the new revision (same machine, same clock), so it includes folding the report, rebuilding the snapshot (${converged.replicas.byState.ready} endpoints, ${MODELS} models), encoding and compressing it once and writing it to every stream. The routers ask for compressed snapshots, as \`llmgw-router\` does, and read the revision without inflating; what a real router then pays to inflate and decode is measured separately on the last message, in this process.`,
    `- Where fan-out time goes: in the controller, rebuilding the snapshot and handing it (${fmtBytes(last.length)} compressed, ${fmtBytes(received.plainBytes)} uncompressed) to the ${ROUTERS} streams took ${fmt(publish.meanMs)} ms on average; the rest is HTTP/2 transmission of ${fmtBytes(last.length * ROUTERS)} per change (${fmtBytes(received.plainBytes * ROUTERS)} uncompressed) and the routers' receipt, with all ${ROUTERS} routers in one process and the fleet's heartbeats still arriving, on two cores shared by three busy processes. Routers on their own machines receive in parallel.`,
    `- Garbage collection in the controller during the steady window: ${gcSteady.count} major collections, ${fmt(gcSteady.ms)} ms in all.`,
    `- ${rssLine}`,
    `- Load average (1 min) ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end: wall-clock figures include waiting for a core.`,
    '',
    markdownTable(rows),
  ];
  const file = plaintext ? writeSection('control-plane-plaintext', 'Control plane, gRPC in plaintext', md.join('\n')) : writeSection('control-plane', 'Control plane', md.join('\n'));
  process.stdout.write(`wrote ${file}\n`);
}

main().then(
  () => {
    if (parseArgs({ options: { role: { type: 'string' } }, strict: false }).values.role !== 'fleet') process.exit(0);
  },
  (error: unknown) => {
    process.stderr.write(`control-plane bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
