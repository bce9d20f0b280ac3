import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import {
  Server,
  ServerCredentials,
  credentials,
  type ClientDuplexStream,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AgentServiceClient,
  ApiEndpoint,
  AgentServiceService,
  CollectOutcome,
  EngineKind,
  Gpu,
  ReplicaState,
  RouterServiceClient,
  RouterServiceService,
  type AgentServiceServer,
  type CommandResult,
  type ConnectRequest,
  type ConnectResponse,
  type EndpointSnapshot,
  type Register,
  type ReportUsageRequest,
  type ReportUsageResponse,
  type RouterServiceServer,
  type WatchRequest,
  type WatchResponse,
} from './index';

const REPO_ROOT = resolve(__dirname, '..', '..', '..');
const GIB = 1024 ** 3;

/** Two snapshots the fake controller streams to every watcher, then it ends the stream. */
const SNAPSHOTS: EndpointSnapshot[] = [
  {
    revision: 1,
    endpoints: [],
    catalog: { revision: 7, models: [{ name: 'tiny', aliases: ['tiny-latest'], engine: EngineKind.ENGINE_KIND_LLAMACPP, endpoints: [] }] },
  },
  {
    revision: 2,
    endpoints: [
      {
        replicaId: 'r-1',
        model: 'tiny',
        url: 'http://10.0.0.5:8000',
        engine: EngineKind.ENGINE_KIND_LLAMACPP,
        nodeId: 'node-a',
        suspect: true,
      },
    ],
    catalog: {
      revision: 7,
      models: [
        {
          name: 'tiny',
          aliases: ['tiny-latest'],
          engine: EngineKind.ENGINE_KIND_LLAMACPP,
          metrics: { running: 'llamacpp:requests_processing', kvUsage: ['a', 'b'] },
          endpoints: [ApiEndpoint.API_ENDPOINT_CHAT, ApiEndpoint.API_ENDPOINT_COMPLETIONS],
        },
      ],
    },
  },
];

/** A fake controller: records what it receives over a real gRPC server on 127.0.0.1. */
class FakeController {
  readonly registers: Register[] = [];
  readonly results: CommandResult[] = [];
  readonly usage: ReportUsageRequest[] = [];
  readonly watchers: WatchRequest[] = [];

  readonly agent: AgentServiceServer = {
    // Welcome on Register, then one command; the stream ends when the agent ends it.
    connect: (call: ServerDuplexStream<ConnectRequest, ConnectResponse>) => {
      call.on('data', (req: ConnectRequest) => {
        const p = req.payload;
        if (p?.$case === 'register') {
          this.registers.push(p.value);
          call.write({ payload: { $case: 'welcome', value: { heartbeatIntervalMs: 5_000, controllerId: 'ctl-1' } } });
          call.write({
            payload: {
              $case: 'collectWeights',
              value: { commandId: 'c-1', paths: ['llmgw-abc123', '../../etc/passwd'] },
            },
          });
        } else if (p?.$case === 'commandResult') {
          this.results.push(p.value);
          call.write({ payload: { $case: 'notLeader', value: {} } });
        }
      });
      call.on('end', () => call.end());
    },
  };

  readonly router: RouterServiceServer = {
    watch: (call: ServerWritableStream<WatchRequest, WatchResponse>) => {
      this.watchers.push(call.request);
      for (const snapshot of SNAPSHOTS) call.write({ snapshot });
      call.end();
    },
    reportUsage: (
      call: ServerUnaryCall<ReportUsageRequest, ReportUsageResponse>,
      callback: sendUnaryData<ReportUsageResponse>,
    ) => {
      this.usage.push(call.request);
      callback(null, {});
    },
  };
}

/** Collects every message of a stream until it ends; rejects on a stream error. */
function readAll<T>(stream: NodeJS.ReadableStream): Promise<T[]> {
  return new Promise((ok, fail) => {
    const seen: T[] = [];
    stream.on('data', (m: T) => seen.push(m));
    stream.on('error', fail);
    stream.on('end', () => ok(seen));
  });
}

describe('llmgw.v1 over @grpc/grpc-js', () => {
  const controller = new FakeController();
  const server = new Server();
  let address = '';

  beforeAll(async () => {
    server.addService(AgentServiceService, controller.agent);
    server.addService(RouterServiceService, controller.router);
    const port = await new Promise<number>((ok, fail) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? fail(err) : ok(p))),
    );
    address = `127.0.0.1:${port}`;
  });

  afterAll(() => {
    server.forceShutdown();
  });

  it('AgentService.Connect keeps an unknown GPU value unset and a reported 0 as 0', async () => {
    const client = new AgentServiceClient(address, credentials.createInsecure());
    try {
      const stream: ClientDuplexStream<ConnectRequest, ConnectResponse> = client.connect();
      const received = readAll<ConnectResponse>(stream);
      const register: Register = {
        nodeId: 'node-a',
        address: '10.0.0.5',
        labels: { zone: 'a' },
        // fabric unknown: left out
        gpus: [
          // an old driver: no utilisation, no ECC, no temperature, no memory used
          { index: 0, uuid: 'GPU-0', name: 'NVIDIA H100 80GB HBM3', gpuClass: 'H100-80GB', memoryTotalBytes: 80 * GIB, healthy: true },
          // a card that reports an idle, cool, error-free, empty state: every value is 0
          {
            index: 1,
            uuid: 'GPU-1',
            name: 'NVIDIA H100 80GB HBM3',
            gpuClass: 'H100-80GB',
            memoryTotalBytes: 80 * GIB,
            memoryUsedBytes: 0,
            utilizationPct: 0,
            temperatureC: 0,
            eccErrors: 0,
            healthy: true,
          },
        ],
        cpuCores: 64,
        memoryBytes: 512 * GIB,
        cache: {
          dir: '/var/lib/llmgw/cache',
          totalBytes: 2048 * GIB,
          entries: [{ name: 'llmgw-abc123', sizeBytes: 5 * GIB, modifiedUnixMs: 1_790_000_000_123 }],
        },
        replicas: [
          {
            replicaId: 'r-1',
            model: 'tiny',
            engine: EngineKind.ENGINE_KIND_VLLM,
            state: ReplicaState.REPLICA_STATE_STARTING,
            gpuIndices: [0, 1],
            rank: 0,
            restarts: 2,
          },
        ],
        agentVersion: '',
      };
      stream.write({ payload: { $case: 'register', value: register } });

      // The agent answers the collect command, then ends its side once told it is not the leader.
      stream.on('data', (res: ConnectResponse) => {
        if (res.payload?.$case === 'collectWeights') {
          const [ok, bad] = res.payload.value.paths;
          stream.write({
            payload: {
              $case: 'commandResult',
              value: {
                commandId: res.payload.value.commandId,
                ok: false,
                message: '1 path refused',
                paths: [
                  { path: ok, outcome: CollectOutcome.COLLECT_OUTCOME_REMOVED, reason: '' },
                  { path: bad, outcome: CollectOutcome.COLLECT_OUTCOME_REFUSED, reason: 'outside the cache directory' },
                ],
              },
            },
          });
        } else if (res.payload?.$case === 'notLeader') {
          stream.end();
        }
      });
      const responses = await received;

      expect(responses.map((r) => r.payload?.$case)).toEqual(['welcome', 'collectWeights', 'notLeader']);
      expect(responses[0].payload).toEqual({ $case: 'welcome', value: { heartbeatIntervalMs: 5_000, controllerId: 'ctl-1' } });
      // NotLeader without a known leader: the address is unset, not ''.
      expect(responses[2].payload?.value).toEqual({ leaderAddress: undefined });

      expect(controller.registers).toHaveLength(1);
      const seen = controller.registers[0];
      const [unknown, zero] = seen.gpus;
      for (const key of ['utilizationPct', 'eccErrors', 'temperatureC', 'memoryUsedBytes'] as const) {
        expect(unknown[key], `unset ${key} must stay unset`).toBeUndefined();
        expect(zero[key], `reported ${key} = 0 must stay 0`).toBe(0);
      }
      expect(seen.fabric).toBeUndefined();
      expect(seen.cache?.totalBytes).toBe(2048 * GIB);
      expect(seen.cache?.freeBytes).toBeUndefined();
      // uint64 values above 2^32 arrive as exact numbers
      expect(seen.gpus[0].memoryTotalBytes).toBe(80 * GIB);
      expect(seen.cache?.entries[0].modifiedUnixMs).toBe(1_790_000_000_123);
      expect(seen.labels).toEqual({ zone: 'a' });
      expect(seen.replicas[0]).toMatchObject({ replicaId: 'r-1', state: ReplicaState.REPLICA_STATE_STARTING, gpuIndices: [0, 1], restarts: 2 });
      expect(seen.replicas[0].port).toBeUndefined();
      expect(seen.replicas[0].pid).toBeUndefined();

      expect(controller.results).toEqual([
        {
          commandId: 'c-1',
          ok: false,
          message: '1 path refused',
          paths: [
            { path: 'llmgw-abc123', outcome: CollectOutcome.COLLECT_OUTCOME_REMOVED, reason: '' },
            { path: '../../etc/passwd', outcome: CollectOutcome.COLLECT_OUTCOME_REFUSED, reason: 'outside the cache directory' },
          ],
        },
      ]);
    } finally {
      client.close();
    }
  });

  it('an unset optional is not on the wire at all, while a 0 is', () => {
    const base = { index: 0, uuid: '', name: '', gpuClass: '', memoryTotalBytes: 0, healthy: false };
    expect(Gpu.encode(base).finish()).toHaveLength(0);
    const zero = Gpu.encode({ ...base, utilizationPct: 0 }).finish();
    expect(zero.length).toBeGreaterThan(0);
    expect(Gpu.decode(zero).utilizationPct).toBe(0);
    expect(Gpu.decode(Gpu.encode(base).finish()).utilizationPct).toBeUndefined();
  });

  it('RouterService.Watch streams complete, revisioned snapshots', async () => {
    const client = new RouterServiceClient(address, credentials.createInsecure());
    try {
      const snapshots = (await readAll<WatchResponse>(client.watch({ routerId: 'router-1', acceptCompressed: false }))).map((r) => r.snapshot);
      expect(controller.watchers).toEqual([{ routerId: 'router-1', acceptCompressed: false }]);
      expect(snapshots.map((s) => s?.revision)).toEqual([1, 2]);
      expect(snapshots[1]?.endpoints).toEqual(SNAPSHOTS[1].endpoints);
      const [first, second] = snapshots.map((s) => s?.catalog?.models[0]);
      // No mapping sent: the model has none (use the engine's defaults), not an empty one.
      expect(first?.metrics).toBeUndefined();
      // A mapping that names only `running` leaves `waiting` and `modelLabel` unset.
      expect(second?.metrics).toEqual({
        running: 'llamacpp:requests_processing',
        waiting: undefined,
        kvUsage: ['a', 'b'],
        modelLabel: undefined,
      });
      expect(second?.aliases).toEqual(['tiny-latest']);
    } finally {
      client.close();
    }
  });

  it('RouterService.ReportUsage carries last-used times per replica', async () => {
    const client = new RouterServiceClient(address, credentials.createInsecure());
    try {
      const lastUsedUnixMs = { 'r-1': 1_790_000_000_001, 'r-2': 1_790_000_000_002 };
      const res = await new Promise<ReportUsageResponse>((ok, fail) =>
        client.reportUsage({ routerId: 'router-1', lastUsedUnixMs, keyUsage: [] }, (err, r) => (err || !r ? fail(err) : ok(r))),
      );
      expect(res).toEqual({});
      expect(controller.usage).toEqual([{ routerId: 'router-1', lastUsedUnixMs, keyUsage: [] }]);
    } finally {
      client.close();
    }
  });
});

describe('proto-check', () => {
  it('passes on the committed contract and generated code', () => {
    const r = spawnSync(process.execPath, [resolve(REPO_ROOT, 'tools', 'scripts', 'proto-check.mjs')], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('up to date');
  });
});
