// An agent for controller tests: speaks AgentService over real gRPC with fake GPUs, and "runs"
// replicas either as real sim-engine processes (engines: 'sim') or by reporting them ready on a
// made-up port at once (engines: 'none', for tests and benchmarks about control logic only).
import { Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import { isCacheName } from '@llmgw/catalog';
import {
  AgentServiceClient,
  CollectOutcome,
  EngineKind,
  ReplicaState,
  type CacheEntry,
  type CollectedPath,
  type ConnectRequest,
  type ConnectResponse,
  type StartReplica,
  type SupervisedReplica,
  type UnheardFailure,
} from '@llmgw/proto';
import { runTsEntry, type SpawnedProcess, spawnProcess, testChannelCredentials } from '@llmgw/testing';

const GB = 1e9;

/** How a fake agent is set up. */
export interface FakeAgentOptions {
  readonly nodeId: string;
  /** Controller gRPC addresses (`host:port`), tried in order; NotLeader's address is followed. */
  controllers: string[];
  /** Address routers reach its engines at (default 127.0.0.1). */
  readonly address?: string;
  readonly gpus?: number;
  readonly gpuClass?: string;
  readonly fabric?: string;
  /** GPU indices reported unhealthy. */
  readonly unhealthyGpus?: readonly number[];
  /** Report utilisation (default true); false = an old driver that cannot. */
  readonly reportsUtilization?: boolean;
  readonly token?: string;
  /** The node secret to present at the first Register (default: none, as a new node). */
  readonly nodeSecret?: string;
  readonly engines?: 'sim' | 'none';
  /** Initial cache listing. */
  readonly cacheEntries?: readonly CacheEntry[];
  /** Paths this agent refuses to collect even when they carry a cache name. */
  readonly refuseCollect?: readonly string[];
  /** Every engine this agent starts crashes at once (reported failed). */
  readonly crashEngines?: boolean;
  /** Every StartReplica is refused (CommandResult ok = false) and nothing runs. */
  readonly refuseStarts?: boolean;
}

/** One message the controller sent, with when it arrived. */
export interface ReceivedCommand {
  readonly at: number;
  readonly payload: NonNullable<ConnectResponse['payload']>;
  /** The controller address it came from. */
  readonly controller: string;
}

interface RunningReplica {
  readonly spec: StartReplica;
  state: ReplicaState;
  port?: number;
  /** Multi-node rank 0: the rendezvous port it "picked", as a real agent reports it. */
  rendezvousPort?: number;
  proc?: SpawnedProcess;
  reason?: string;
}

let fakePorts = 20_000;

/** See the file comment. Always `kill()` or `stop()` it. */
export class FakeAgent {
  readonly received: ReceivedCommand[] = [];
  readonly replicas = new Map<string, RunningReplica>();
  private cache: CacheEntry[];
  private cacheChanged = true;
  private call: ClientDuplexStream<ConnectRequest, ConnectResponse> | undefined;
  private client: AgentServiceClient | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private next = 0;
  private redirect: string | undefined;
  private dead = false;
  /** Address of the controller that welcomed the current stream, if any. */
  connectedTo: string | undefined;
  /** Streams that got a Welcome. */
  welcomes = 0;
  /** Last gRPC error the stream ended with (e.g. UNAUTHENTICATED). */
  lastError: { code?: number; details?: string } | undefined;
  /** Every stream that ended: where it went, when (ms), and the status it ended with. */
  readonly ended: { controller: string; at: number; code: number; details: string }[] = [];
  /** The node secret this agent holds (issued in a Welcome), sent on every Register like the real agent. */
  nodeSecret: string | undefined;

  constructor(readonly options: FakeAgentOptions) {
    this.cache = [...(options.cacheEntries ?? [])];
    this.nodeSecret = options.nodeSecret;
  }

  /** Commands received of one kind. */
  commands(kind: NonNullable<ConnectResponse['payload']>['$case']): ReceivedCommand[] {
    return this.received.filter((c) => c.payload.$case === kind);
  }

  /** Start and stop commands received after `since` (ms). */
  startsAndStopsSince(since: number): ReceivedCommand[] {
    return this.received.filter((c) => c.at >= since && (c.payload.$case === 'startReplica' || c.payload.$case === 'stopReplica'));
  }

  /** Replicas this agent runs (any state but stopped). */
  running(): string[] {
    return [...this.replicas.keys()].sort();
  }

  connect(): void {
    if (this.dead) return;
    const address = this.redirect ?? this.options.controllers[this.next++ % this.options.controllers.length];
    this.redirect = undefined;
    this.client?.close();
    this.client = new AgentServiceClient(address, testChannelCredentials());
    const md = new Metadata();
    if (this.options.token !== undefined) md.set('authorization', `Bearer ${this.options.token}`);
    const call = this.client.connect(md);
    this.call = call;
    call.on('data', (res: ConnectResponse) => this.onMessage(res, address));
    call.on('error', (error: { code?: number; details?: string }) => {
      this.lastError = { code: error.code, details: error.details };
    });
    // 'status' ends every client call, however it ended (refused, cancelled, server gone).
    call.on('status', (s: { code: number; details: string }) => {
      this.ended.push({ controller: address, at: Date.now(), code: s.code, details: s.details });
      if (this.call !== call) return;
      this.call = undefined;
      this.connectedTo = undefined;
      clearInterval(this.heartbeatTimer);
      if (!this.dead) this.reconnectTimer = setTimeout(() => this.connect(), 100);
    });
    call.write({ payload: { $case: 'register', value: this.register() } });
  }

  /**
   * One Register at `controller` outside this agent's own stream: resolves with every message the
   * stream carried and the status it ended with. It neither stays nor follows a NotLeader, so a
   * test can ask a standby what it tells agents without a node joining anywhere.
   */
  registerOnce(controller: string, deadlineMs = 10_000): Promise<{ messages: NonNullable<ConnectResponse['payload']>[]; code: number; details: string }> {
    const client = new AgentServiceClient(controller, testChannelCredentials());
    const md = new Metadata();
    if (this.options.token !== undefined) md.set('authorization', `Bearer ${this.options.token}`);
    const call = client.connect(md, { deadline: Date.now() + deadlineMs });
    const messages: NonNullable<ConnectResponse['payload']>[] = [];
    return new Promise((resolve) => {
      call.on('data', (res: ConnectResponse) => {
        if (res.payload) messages.push(res.payload);
        // A leader would keep the stream: the first message is the answer.
        if (res.payload?.$case === 'welcome') call.cancel();
      });
      call.on('error', () => undefined);
      call.on('status', (s: { code: number; details: string }) => {
        client.close();
        resolve({ messages, code: s.code, details: s.details });
      });
      call.write({ payload: { $case: 'register', value: this.register() } });
    });
  }

  /** Like `kill -9` of the agent and its engines: the stream drops, engines die, nothing reconnects. */
  async kill(): Promise<void> {
    this.dead = true;
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.reconnectTimer);
    this.call?.cancel();
    this.client?.close();
    const engines = [...this.replicas.values()];
    this.replicas.clear();
    await Promise.all(engines.map((r) => r.proc?.kill9()));
  }

  /** A network partition: the stream drops and nothing is sent, but the engines keep running. */
  partition(): void {
    this.dead = true;
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.reconnectTimer);
    this.call?.cancel();
  }

  /** The partition heals: the agent reconnects and registers with the replicas it still runs. */
  heal(): void {
    this.dead = false;
    this.connect();
  }

  /** Stops engines and disconnects. */
  async stop(): Promise<void> {
    this.dead = true;
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.reconnectTimer);
    this.call?.end();
    this.call?.cancel();
    this.client?.close();
    await Promise.all([...this.replicas.values()].map((r) => r.proc?.stop('SIGTERM', 2_000)));
  }

  private register() {
    const o = this.options;
    const n = o.gpus ?? 8;
    return {
      nodeId: o.nodeId,
      address: o.address ?? '127.0.0.1',
      labels: { zone: 'test' },
      ...(o.fabric !== undefined ? { fabric: o.fabric } : {}),
      gpus: Array.from({ length: n }, (_, i) => ({
        index: i,
        uuid: `GPU-${o.nodeId}-${i}`,
        name: 'NVIDIA H100 80GB HBM3',
        gpuClass: o.gpuClass ?? 'H100-80GB',
        memoryTotalBytes: 80 * GB,
        memoryUsedBytes: 1 * GB,
        ...(o.reportsUtilization === false ? {} : { utilizationPct: 3 }),
        temperatureC: 40,
        eccErrors: 0,
        healthy: !(o.unhealthyGpus ?? []).includes(i),
      })),
      cpuCores: 64,
      memoryBytes: 512 * GB,
      cache: { dir: '/var/cache/llmgw', totalBytes: 2000 * GB, freeBytes: 1500 * GB, entries: [...this.cache] },
      replicas: this.supervised(),
      agentVersion: 'fake-1',
      ...(this.nodeSecret !== undefined ? { nodeSecret: this.nodeSecret } : {}),
    };
  }

  private supervised(): SupervisedReplica[] {
    return [...this.replicas.entries()].map(([id, r]) => ({
      replicaId: id,
      model: r.spec.model,
      engine: r.spec.engine,
      state: r.state,
      ...(r.port !== undefined ? { port: r.port } : {}),
      ...(r.rendezvousPort !== undefined ? { rendezvousPort: r.rendezvousPort } : {}),
      gpuIndices: [...r.spec.gpuIndices],
      rank: r.spec.rank,
      restarts: 0,
      ...(r.reason !== undefined ? { reason: r.reason } : {}),
    }));
  }

  private heartbeat(): void {
    const o = this.options;
    const n = o.gpus ?? 8;
    const listing = this.cacheChanged ? { cacheListing: { entries: [...this.cache] } } : {};
    this.cacheChanged = false;
    this.send({
      $case: 'heartbeat',
      value: {
        gpus: Array.from({ length: n }, (_, i) => ({
          index: i,
          memoryUsedBytes: 1 * GB,
          ...(o.reportsUtilization === false ? {} : { utilizationPct: 3 }),
          temperatureC: 40,
          eccErrors: 0,
          healthy: !(o.unhealthyGpus ?? []).includes(i),
        })),
        cacheFreeBytes: 1500 * GB,
        replicas: this.supervised(),
        ...listing,
      },
    });
  }

  /** Reports engine failures nobody heard, as a real agent does right after a Welcome. */
  reportUnheard(failures: UnheardFailure[]): void {
    this.send({ $case: 'unheardFailures', value: { failures } });
  }

  private send(payload: ConnectRequest['payload']): void {
    if (this.call && !this.dead) this.call.write({ payload });
  }

  private status(id: string): void {
    const r = this.replicas.get(id);
    if (!r) return;
    this.send({
      $case: 'replicaStatus',
      value: {
        replicaId: id,
        state: r.state,
        lastLogLines: [],
        restarts: 0,
        ...(r.port !== undefined ? { port: r.port } : {}),
        ...(r.rendezvousPort !== undefined ? { rendezvousPort: r.rendezvousPort } : {}),
        ...(r.reason ? { reason: r.reason } : {}),
      },
    });
  }

  private result(commandId: string, ok: boolean, message = '', paths: CollectedPath[] = []): void {
    this.send({ $case: 'commandResult', value: { commandId, ok, message, paths } });
  }

  private onMessage(res: ConnectResponse, controller: string): void {
    const p = res.payload;
    if (!p || this.dead) return;
    this.received.push({ at: Date.now(), payload: p, controller });
    switch (p.$case) {
      case 'welcome':
        this.welcomes += 1;
        if (p.value.nodeSecret !== undefined) this.nodeSecret = p.value.nodeSecret;
        this.connectedTo = controller;
        clearInterval(this.heartbeatTimer);
        this.heartbeatTimer = setInterval(() => this.heartbeat(), p.value.heartbeatIntervalMs);
        this.heartbeat();
        return;
      case 'notLeader':
        this.redirect = p.value.leaderAddress;
        return;
      case 'startReplica':
        void this.start(p.value);
        return;
      case 'stopReplica': {
        const r = this.replicas.get(p.value.replicaId);
        this.replicas.delete(p.value.replicaId);
        void r?.proc?.stop('SIGTERM', 2_000);
        this.send({ $case: 'replicaStatus', value: { replicaId: p.value.replicaId, state: ReplicaState.REPLICA_STATE_STOPPED, lastLogLines: [], restarts: 0 } });
        this.result(p.value.commandId, true);
        return;
      }
      case 'fetchWeights':
        if (!this.cache.some((e) => e.name === p.value.cacheName)) {
          this.cache.push({ name: p.value.cacheName, sizeBytes: p.value.sizeBytes ?? 1, modifiedUnixMs: Date.now() });
          this.cacheChanged = true;
        }
        this.result(p.value.commandId, true);
        return;
      case 'collectWeights': {
        const paths: CollectedPath[] = p.value.paths.map((path) => {
          if (!isCacheName(path) || (this.options.refuseCollect ?? []).includes(path)) {
            return { path, outcome: CollectOutcome.COLLECT_OUTCOME_REFUSED, reason: 'not a file this agent fetched' };
          }
          const before = this.cache.length;
          this.cache = this.cache.filter((e) => e.name !== path);
          if (this.cache.length === before) return { path, outcome: CollectOutcome.COLLECT_OUTCOME_NOT_FOUND, reason: '' };
          this.cacheChanged = true;
          return { path, outcome: CollectOutcome.COLLECT_OUTCOME_REMOVED, reason: '' };
        });
        this.result(p.value.commandId, true, '', paths);
        return;
      }
    }
  }

  private async start(spec: StartReplica): Promise<void> {
    if (this.options.refuseStarts) {
      this.result(spec.commandId, false, 'GPU 0 is held by another process');
      return;
    }
    const known = this.replicas.get(spec.replicaId);
    if (known?.state === ReplicaState.REPLICA_STATE_FAILED) {
      // A start for a failed replica is a restart.
      this.replicas.delete(spec.replicaId);
      return this.start(spec);
    }
    if (known) {
      // Idempotent: the same id is adopted, its state reported again.
      this.status(spec.replicaId);
      this.result(spec.commandId, true, 'already running');
      return;
    }
    const r: RunningReplica = { spec, state: ReplicaState.REPLICA_STATE_STARTING, ...(spec.rank === 0 && spec.members.length > 1 && spec.leaderAddress === undefined ? { rendezvousPort: fakePorts++ } : {}) };
    this.replicas.set(spec.replicaId, r);
    this.status(spec.replicaId);
    this.result(spec.commandId, true);
    if (this.options.crashEngines) {
      r.state = ReplicaState.REPLICA_STATE_FAILED;
      r.reason = 'engine exited with status 1';
      this.send({ $case: 'replicaStatus', value: { replicaId: spec.replicaId, state: r.state, reason: r.reason, exitCode: 1, lastLogLines: ['CUDA error'], restarts: 0 } });
      return;
    }
    if ((this.options.engines ?? 'none') === 'none') {
      r.port = fakePorts++;
      r.state = ReplicaState.REPLICA_STATE_READY;
      this.status(spec.replicaId);
      return;
    }
    try {
      const engine = spec.engine === EngineKind.ENGINE_KIND_LLAMACPP ? 'llamacpp' : 'vllm';
      const proc = await spawnProcess({
        ...runTsEntry('tools/sim-engine/src/main.ts', ['--port', '0', '--engine', engine, '--served-model-name', spec.servedName, '--load-seconds', '0']),
        name: `sim-engine ${spec.replicaId}`,
        readyWhen: { stdoutMatch: /sim-engine listening on http:\/\/[^\s]+:(\d+)/ },
        deadlineMs: 60_000,
      });
      r.proc = proc;
      await proc.waitForStdout(/sim-engine ready/, 60_000);
      if (this.replicas.get(spec.replicaId) !== r || this.dead) {
        await proc.stop('SIGTERM', 2_000);
        return;
      }
      r.port = Number(proc.readyMatch?.[1]);
      r.state = ReplicaState.REPLICA_STATE_READY;
      this.status(spec.replicaId);
    } catch (error) {
      if (this.replicas.get(spec.replicaId) !== r) return;
      r.state = ReplicaState.REPLICA_STATE_FAILED;
      r.reason = (error as Error).message.split('\n')[0];
      this.status(spec.replicaId);
    }
  }
}
