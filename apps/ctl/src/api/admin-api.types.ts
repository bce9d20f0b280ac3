// The JSON shapes of the controller's admin API (apps/controller/README.md) and of the catalog
// API (apps/catalog, /openapi.json), as `llmgw` reads them. Absent fields are unknown, never 0.
import type { EngineKind, NodeState, ReplicaState } from '@llmgw/domain';

/** GET /v1/admin/status. */
export interface StatusView {
  controller: {
    id: string;
    leader: boolean;
    phase: string;
    leaderAddress?: string;
    catalogRevision?: number;
    rejectedCatalogRevision?: number;
    snapshotRevision?: number;
  };
  nodes: { total: number; cordoned: number } & Record<NodeState, number>;
  /** Per GPU class; total = used + free + unhealthy + unavailable. */
  capacity: { gpuClass: string; total: number; used: number; free: number; unhealthy: number; unavailable: number }[];
  /** Free whole nodes per fabric. */
  fabrics: { fabric: string; nodes: number; freeNodes: number }[];
  replicas: { total: number; byState: Record<ReplicaState, number> };
  models: { total: number; satisfied: number; unplaceable: number };
  unplaceable: UnplaceableView[];
  /** Ready replicas a router has reported, longest idle first; `unknown` counts ready ones none has. */
  idle: { replicas: { replicaId: string; model: string; nodeId?: string; lastUsedAt: number; idleSeconds: number }[]; unknown: number };
}

export interface UnplaceableView {
  model: string;
  summary: string;
  reasons: { profileIndex: number; nodeId?: string; reason: string }[];
  attempts: number;
  since: number;
  retryAt: number;
}

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
  replicaId?: string;
}

/** GET /v1/admin/nodes → `{ nodes }`. */
export interface NodeView {
  id: string;
  address: string;
  state: NodeState;
  cordoned: boolean;
  draining: boolean;
  connected: boolean;
  lastSeen?: number;
  fabric?: string;
  labels: Record<string, string>;
  cpuCores: number;
  memoryBytes: number;
  gpus: GpuView[];
  cache: { dir: string; totalBytes?: number; freeBytes?: number; entries: number };
  agentVersion?: string;
  replicas: string[];
}

/** GET /v1/admin/replicas[?model=] → `{ replicas }`. */
export interface ReplicaView {
  id: string;
  model: string;
  profileIndex: number;
  engine: EngineKind;
  state: ReplicaState;
  reason?: string;
  restarts: number;
  members: { nodeId: string; rank: number; gpuIndices: number[]; port?: number }[];
  url?: string;
  createdAt: number;
  updatedAt: number;
  lastUsedAt?: number;
  idleSeconds?: number;
}

/** GET /v1/admin/events[?model=&node=&replica=&limit=] → `{ events }`, newest first. */
export interface EventView {
  id: number;
  time: number;
  kind: string;
  model?: string;
  replicaId?: string;
  nodeId?: string;
  reason?: string;
}

/** GET /v1/admin/gc: per node, cache entries with a cache name no catalog model wants. */
export interface GcPlanView {
  catalogRevision: number;
  nodes: { nodeId: string; connected: boolean; entries: { name: string; sizeBytes: number; modifiedAt: number }[]; totalBytes: number }[];
  totalBytes: number;
}

/** POST /v1/admin/gc/collect: what each agent did with each path it was asked to remove. */
export interface GcCollectView {
  catalogRevision: number;
  nodes: {
    nodeId: string;
    asked: string[];
    results?: { path: string; outcome: 'removed' | 'refused' | 'not_found' | 'failed'; reason?: string }[];
    error?: string;
  }[];
  removedBytes: number;
}

/** A model as the catalog API stores it (normalised: sizes in bytes, replicas as {min, max}). */
export interface CatalogModel {
  name: string;
  aliases?: string[];
  source: string;
  size: number;
  replicas: { min: number; max: number };
  profiles: { engine: EngineKind; gpuClass?: string; gpusPerNode?: number; nodes?: number }[];
  [key: string]: unknown;
}

/** GET /v1/catalog. */
export interface CatalogView {
  revision: number;
  models: CatalogModel[];
}

/** POST /v1/catalog/validate. */
export interface ValidationReport {
  valid: boolean;
  problems: { path: string; message: string }[];
  changes?: { added: string[]; removed: string[]; changed: string[]; currentRevision: number };
  preview?: {
    nodes: number;
    models: {
      model: string;
      wanted: number;
      existing: number;
      outcome: 'satisfied' | 'fits' | 'partial' | 'unplaceable';
      placements: { profileIndex: number; profile: string; members: { nodeId: string; gpuIndices: number[] }[] }[];
      unplaceable?: { summary: string; reasons: { profileIndex: number; nodeId?: string; reason: string }[] };
      truncated?: boolean;
    }[];
  };
}
