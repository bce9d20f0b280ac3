// A fixed cluster state as the controller's admin API reports it: seven nodes on two fabrics,
// three GPU classes (one card unhealthy, a cordoned and a lost node), eleven replicas, one
// unplaceable model, and two ready replicas no router has reported using.
import type { GcCollectView, GcPlanView, NodeView, ReplicaView, StatusView } from '../api/admin-api.types';

/** 2026-09-17T12:00:00Z: "now" for tests that show ages. */
export const NOW = Date.UTC(2026, 8, 17, 12, 0, 0);

export const STATUS: StatusView = {
  controller: { id: 'ctl-7f3a', leader: true, phase: 'active', catalogRevision: 12, snapshotRevision: 40 },
  nodes: { total: 7, cordoned: 1, healthy: 5, unreachable: 1, lost: 1 },
  capacity: [
    { gpuClass: 'A100-80GB', total: 8, used: 2, free: 6, unhealthy: 0, unavailable: 0 },
    { gpuClass: 'H100-80GB', total: 24, used: 15, free: 5, unhealthy: 1, unavailable: 3 },
    { gpuClass: 'L4', total: 4, used: 0, free: 0, unhealthy: 0, unavailable: 4 },
  ],
  fabrics: [
    { fabric: 'ib-east', nodes: 3, freeNodes: 1 },
    { fabric: 'ib-west', nodes: 2, freeNodes: 0 },
  ],
  replicas: { total: 11, byState: { pending: 0, fetching: 1, starting: 1, ready: 7, draining: 1, stopped: 0, failed: 1, lost: 0 } },
  models: { total: 6, satisfied: 4, unplaceable: 1 },
  unplaceable: [
    {
      model: 'llama-3.1-405b-instruct',
      summary:
        'model llama-3.1-405b-instruct: no profile fits\n' +
        '  profile 0 (vllm 2 nodes × 8×H100-80GB):\n' +
        '    needs 2 whole nodes on one fabric; ib-east has 1 free, ib-west has 0 free',
      reasons: [{ profileIndex: 0, reason: 'needs 2 whole nodes on one fabric; ib-east has 1 free, ib-west has 0 free' }],
      attempts: 4,
      since: NOW - 3_600_000,
      retryAt: NOW + 60_000,
    },
  ],
  idle: {
    replicas: [
      { replicaId: 'r-qwen-1', model: 'qwen2.5-0.5b-instruct', nodeId: 'cpu-1', lastUsedAt: NOW - 274_000_000, idleSeconds: 274_000 },
      { replicaId: 'r-mistral-2', model: 'mistral-7b-instruct-q4', nodeId: 'gpu-h-2', lastUsedAt: NOW - 18_000_000, idleSeconds: 18_000 },
      { replicaId: 'r-llama8b-1', model: 'llama-3.1-8b-instruct', nodeId: 'gpu-h-1', lastUsedAt: NOW - 42_000, idleSeconds: 42 },
    ],
    unknown: 2,
  },
};

function gpus(n: number, gpuClass: string, held: Record<number, string> = {}, over: { unhealthy?: number[]; util?: number } = {}): NodeView['gpus'] {
  return Array.from({ length: n }, (_, index) => ({
    index,
    uuid: `GPU-${gpuClass}-${index}`,
    name: `NVIDIA ${gpuClass}`,
    gpuClass,
    memoryTotalBytes: 80e9,
    healthy: !(over.unhealthy ?? []).includes(index),
    ...(over.util !== undefined ? { utilizationPct: over.util } : {}),
    ...(held[index] ? { replicaId: held[index] } : {}),
  }));
}

export const NODES: NodeView[] = [
  {
    id: 'gpu-h-1',
    address: '10.0.0.11',
    state: 'healthy',
    cordoned: false,
    draining: false,
    connected: true,
    lastSeen: NOW - 4_000,
    fabric: 'ib-east',
    labels: {},
    cpuCores: 96,
    memoryBytes: 1024e9,
    gpus: gpus(8, 'H100-80GB', { 0: 'r-llama8b-1', 1: 'r-llama8b-2' }, { util: 37 }),
    cache: { dir: '/var/cache/llmgw', totalBytes: 2000e9, freeBytes: 1200e9, entries: 3 },
    replicas: ['r-llama8b-1', 'r-llama8b-2'],
  },
  {
    id: 'gpu-h-3',
    address: '10.0.0.13',
    state: 'healthy',
    cordoned: true,
    draining: true,
    connected: true,
    lastSeen: NOW - 2_000,
    fabric: 'ib-west',
    labels: {},
    cpuCores: 96,
    memoryBytes: 1024e9,
    gpus: gpus(8, 'H100-80GB', {}, { unhealthy: [5] }),
    cache: { dir: '/var/cache/llmgw', entries: 0 },
    replicas: [],
  },
  {
    id: 'cpu-1',
    address: '10.0.1.1',
    state: 'unreachable',
    cordoned: false,
    draining: false,
    connected: false,
    labels: {},
    cpuCores: 32,
    memoryBytes: 128e9,
    gpus: [],
    cache: { dir: '/srv/llmgw', totalBytes: 500e9, freeBytes: 320e9, entries: 1 },
    replicas: ['r-qwen-1'],
  },
];

export const REPLICAS: ReplicaView[] = [
  {
    id: 'r-llama8b-1',
    model: 'llama-3.1-8b-instruct',
    profileIndex: 0,
    engine: 'vllm',
    state: 'ready',
    restarts: 0,
    members: [{ nodeId: 'gpu-h-1', rank: 0, gpuIndices: [0], port: 20001 }],
    url: 'http://10.0.0.11:20001',
    createdAt: NOW - 7_200_000,
    updatedAt: NOW - 7_000_000,
    lastUsedAt: NOW - 42_000,
    idleSeconds: 42,
  },
  {
    id: 'r-llama8b-2',
    model: 'llama-3.1-8b-instruct',
    profileIndex: 0,
    engine: 'vllm',
    state: 'fetching',
    reason: 'downloading weights',
    restarts: 1,
    members: [{ nodeId: 'gpu-h-1', rank: 0, gpuIndices: [1] }],
    createdAt: NOW - 300_000,
    updatedAt: NOW - 10_000,
  },
  {
    id: 'r-qwen-1',
    model: 'qwen2.5-0.5b-instruct',
    profileIndex: 0,
    engine: 'llamacpp',
    state: 'ready',
    restarts: 0,
    members: [{ nodeId: 'cpu-1', rank: 0, gpuIndices: [], port: 20010 }],
    createdAt: NOW - 400_000_000,
    updatedAt: NOW - 300_000_000,
  },
];

export const GC_PLAN: GcPlanView = {
  catalogRevision: 12,
  nodes: [
    {
      nodeId: 'gpu-h-1',
      connected: true,
      entries: [
        { name: 'llmgw-0123456789abcdef-old-model.gguf', sizeBytes: 4_368_439_584, modifiedAt: NOW - 86_400_000 },
        { name: 'llmgw-fedcba9876543210-Llama-2-7b', sizeBytes: 13_500_000_000, modifiedAt: NOW - 172_800_000 },
      ],
      totalBytes: 17_868_439_584,
    },
    {
      nodeId: 'cpu-1',
      connected: false,
      entries: [{ name: 'llmgw-00112233aabbccdd-tiny.gguf', sizeBytes: 491_000_000, modifiedAt: NOW - 3_600_000 }],
      totalBytes: 491_000_000,
    },
  ],
  totalBytes: 18_359_439_584,
};

export const GC_COLLECT: GcCollectView = {
  catalogRevision: 12,
  nodes: [
    {
      nodeId: 'gpu-h-1',
      asked: ['llmgw-0123456789abcdef-old-model.gguf', 'llmgw-fedcba9876543210-Llama-2-7b'],
      results: [
        { path: 'llmgw-0123456789abcdef-old-model.gguf', outcome: 'removed' },
        { path: 'llmgw-fedcba9876543210-Llama-2-7b', outcome: 'refused', reason: 'is a symbolic link leading out of the cache directory' },
      ],
    },
    { nodeId: 'cpu-1', asked: ['llmgw-00112233aabbccdd-tiny.gguf'], results: [{ path: 'llmgw-00112233aabbccdd-tiny.gguf', outcome: 'removed' }] },
  ],
  removedBytes: 4_859_439_584,
};
