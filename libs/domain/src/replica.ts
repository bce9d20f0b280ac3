import type { EngineKind, MetricMapping } from './engine';

export const REPLICA_STATES = [
  'pending',
  'fetching',
  'starting',
  'ready',
  'draining',
  'stopped',
  'failed',
  'lost',
] as const;
export type ReplicaState = (typeof REPLICA_STATES)[number];

/** One node's share of a replica: the GPUs it holds there and the port its engine listens on. */
export interface ReplicaMember {
  readonly nodeId: string;
  /** 0 is the leader member that serves HTTP; others are workers (multi-node). */
  readonly rank: number;
  readonly gpuIndices: readonly number[];
  readonly port?: number;
  /**
   * Multi-node rank 0 only: the port members rendezvous at on its node (the Ray head for vLLM),
   * picked by that node's agent and reported; absent until then.
   */
  readonly rendezvousPort?: number;
}

export interface Replica {
  readonly id: string;
  readonly model: string;
  readonly profileIndex: number;
  readonly engine: EngineKind;
  readonly members: readonly ReplicaMember[];
  readonly state: ReplicaState;
  readonly reason?: string;
  readonly restarts: number;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Newest time any router used it, ms since epoch; absent = unknown, never idle. */
  readonly lastUsedAt?: number;
}

/** A ready replica as routers see it. */
export interface Endpoint {
  readonly replicaId: string;
  readonly model: string;
  readonly url: string;
  readonly engine: EngineKind;
  readonly nodeId: string;
  /** The node missed heartbeats: prefer other endpoints while any exist. */
  readonly suspect: boolean;
  readonly metrics?: MetricMapping;
}
