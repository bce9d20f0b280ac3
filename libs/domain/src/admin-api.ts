// The JSON shapes of the controller's admin API (apps/controller/README.md): the controller
// builds them, the `llmgw` command line reads them. One definition, so the two cannot drift.
// Times are ms since the epoch; absent fields are unknown, never 0.
import type { EngineKind } from './engine';
import type { NodeState } from './node';
import type { ReplicaState } from './replica';

export interface GpuView {
  index: number;
  uuid: string;
  name: string;
  gpuClass: string;
  memoryTotalBytes: number;
  memoryUsedBytes?: number;
  utilizationPct?: number;
  temperatureC?: number;
  eccErrors?: number;
  healthy: boolean;
  /** The replica holding it, when one does. */
  replicaId?: string;
}

export interface NodeView {
  id: string;
  address: string;
  state: NodeState;
  cordoned: boolean;
  draining: boolean;
  /** An agent stream is open to this controller. */
  connected: boolean;
  /** ms since the epoch. */
  lastSeen?: number;
  fabric?: string;
  labels: Record<string, string>;
  cpuCores: number;
  memoryBytes: number;
  gpus: GpuView[];
  cache: { dir: string; totalBytes?: number; freeBytes?: number; entries: number };
  agentVersion?: string;
  /** Replica ids with a member here. */
  replicas: string[];
}

export interface ReplicaView {
  id: string;
  model: string;
  profileIndex: number;
  engine: EngineKind;
  state: ReplicaState;
  reason?: string;
  restarts: number;
  members: { nodeId: string; rank: number; gpuIndices: number[]; port?: number }[];
  /** The engine's base URL, once rank 0 has a port. */
  url?: string;
  createdAt: number;
  updatedAt: number;
  /** Newest router use, ms; absent = unknown (never reported), not idle. */
  lastUsedAt?: number;
  idleSeconds?: number;
}

export interface UnplaceableView {
  model: string;
  summary: string;
  reasons: { profileIndex: number; nodeId?: string; reason: string }[];
  attempts: number;
  since: number;
  retryAt: number;
}

export interface StatusView {
  controller: {
    id: string;
    leader: boolean;
    phase: string;
    leaderAddress?: string;
    catalogRevision?: number;
    rejectedCatalogRevision?: number;
    snapshotRevision?: number;
    /** The last reconcile pass: when (ms), actions applied, planning and total time (ms). */
    lastPass?: { at: number; actions: number; planMs: number; totalMs: number };
    /** The last reconcile pass that changed anything, same fields. */
    lastActivePass?: { at: number; actions: number; planMs: number; totalMs: number };
  };
  nodes: { total: number; cordoned: number } & Record<NodeState, number>;
  /** Per GPU class; total = used + free + unhealthy + unavailable (unhealthy is neither used nor free). */
  capacity: { gpuClass: string; total: number; used: number; free: number; unhealthy: number; unavailable: number }[];
  /** Free whole nodes per fabric: what decides whether a multi-node replica can land. */
  fabrics: { fabric: string; nodes: number; freeNodes: number }[];
  replicas: { total: number; byState: Record<ReplicaState, number> };
  models: { total: number; satisfied: number; unplaceable: number };
  unplaceable: UnplaceableView[];
  /** Ready replicas a router has reported, longest idle first; `unknown` counts the ready ones none has. */
  idle: { replicas: { replicaId: string; model: string; nodeId?: string; lastUsedAt: number; idleSeconds: number }[]; unknown: number };
}

export interface GcNodePlan {
  nodeId: string;
  connected: boolean;
  /** Cache entries carrying a cache name no catalog model wants, by name. */
  entries: { name: string; sizeBytes: number; modifiedAt: number }[];
  totalBytes: number;
}

export interface GcPlanView {
  catalogRevision: number;
  nodes: GcNodePlan[];
  totalBytes: number;
}

/** What an agent did with one path it was asked to remove. */
export type CollectOutcomeName = 'removed' | 'refused' | 'not_found' | 'failed';

export interface GcCollectNodeResult {
  nodeId: string;
  /** The names the controller asked this node to remove. */
  asked: string[];
  /** The agent's answer per path, in the order asked; absent when it gave none (see `error`). */
  results?: { path: string; outcome: CollectOutcomeName; reason?: string }[];
  /** Why there is no per-path answer: no agent stream, refused command, no answer in time. */
  error?: string;
}

export interface GcCollectView {
  catalogRevision: number;
  nodes: GcCollectNodeResult[];
  /** Bytes of the entries agents reported removed (sizes as last listed). */
  removedBytes: number;
}

/** GET /v1/admin/events → `{ events }`, newest first. */
export interface EventView {
  id: number;
  time: number;
  kind: string;
  model?: string;
  replicaId?: string;
  nodeId?: string;
  reason?: string;
}
