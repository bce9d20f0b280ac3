import { Catalog } from '@llmgw/catalog';
import { DomainError, ErrorCode, type Replica } from '@llmgw/domain';
import type { Fence } from '@llmgw/lease';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { NodeRegistry } from '../nodes/node.registry';
import { ReplicaRegistry } from '../replicas/replica.registry';
import { Reconciler } from './replica.reconciler';
import { sequentialReplicaIds } from './replica-ids';

const FENCE: Fence = { kind: 'lease', lease: 'controller', owner: 'me', generation: 1 };

/**
 * A leader whose catalog no longer has the model of its one ready replica (r1 on node-1): the
 * pass stops it. `log` has the store writes and agent commands in the order they happened.
 */
function setup() {
  const log: string[] = [];
  const lead = { held: true };
  const nodes = new NodeRegistry();
  nodes.register(
    {
      id: 'node-1',
      address: '10.0.0.1',
      labels: {},
      gpus: [{ index: 0, uuid: 'GPU-0', name: 'H100', gpuClass: 'H100-80GB', memoryTotalBytes: 80e9, healthy: true }],
      cpuCores: 8,
      memoryBytes: 64e9,
      cacheDir: '/c',
      cacheEntries: [],
      replicas: [{ replicaId: 'r1', model: 'llama', engine: 'vllm', state: 'ready', port: 8000, gpuIndices: [0], rank: 0, restarts: 0 }],
      agentVersion: '',
    },
    0,
  );
  const replicas = new ReplicaRegistry();
  const r1: Replica = { id: 'r1', model: 'llama', profileIndex: 0, engine: 'vllm', members: [{ nodeId: 'node-1', rank: 0, gpuIndices: [0], port: 8000 }], state: 'ready', restarts: 0, createdAt: 0, updatedAt: 0 };
  replicas.loadFromStore([r1]);
  const catalog = Catalog.create({ models: [{ name: 'other', source: 'hf://org/other@main', size: '10GB', replicas: 0, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 1 }] }] });
  const fence = (): Fence => {
    if (!lead.held) throw new DomainError(ErrorCode.Fenced, 'not leading');
    return FENCE;
  };
  const reconciler = new Reconciler(
    {
      clock: { now: () => 1_000 },
      timing: { backoffMinMs: 1_000, backoffMaxMs: 60_000, maxRestarts: 2, commandGraceMs: 5_000 },
      nodes,
      replicas,
      commands: {
        startReplica: () => true,
        stopReplica: (nodeId, replicaId) => log.push(`stop ${replicaId} on ${nodeId}`) > 0,
        fetchWeights: () => true,
      },
      ids: sequentialReplicaIds(),
      store: {
        replicas: {
          place: async () => undefined,
          placeAll: async () => undefined,
          evict: async () => true,
          update: async (id, change, f) => {
            fence();
            log.push(`store ${id} ${change.state} (generation ${f.kind === 'lease' ? f.generation : '-'})`);
            return { ...r1, state: change.state ?? r1.state };
          },
        },
        events: { record: async (e) => ({ ...e, id: 1, at: 1_000 }) as never },
      },
      catalog: () => ({ catalog, revision: 1 }),
      mayAct: () => true,
      fence,
    },
    pino({ level: 'silent' }),
  );
  return { reconciler, replicas, log, lead };
}

describe('Reconciler stops', () => {
  it('stores the replica as draining (fenced) before any agent is told to stop it', async () => {
    const { reconciler, replicas, log } = setup();
    await reconciler.pass();
    expect(log).toEqual(['store r1 draining (generation 1)', 'stop r1 on node-1']);
    expect(replicas.get('r1')?.replica.state).toBe('draining');
  });

  it('a leader deposed before the write sends no stop, and leaves the replica as it was', async () => {
    const { reconciler, replicas, log, lead } = setup();
    lead.held = false;
    await reconciler.pass();
    expect(log).toEqual([]);
    expect(replicas.get('r1')?.replica.state).toBe('ready');
  });
});
