import type { Model, NodeInfo, ReplicaMember } from '@llmgw/domain';

/** What to place: one replica of `model`. */
export interface PlacementRequest {
  readonly model: Model;
  /**
   * Cache name of the model's weights (see `cacheName` in @llmgw/catalog). Absent for `file://`
   * sources, which are used in place: no disk check then.
   */
  readonly cacheName?: string;
}

/**
 * One node's share of a placed replica: the GPUs it holds there (empty for CPU replicas) and
 * the host memory it reserved, bytes (absent = the profile did not say).
 */
export interface Allocation {
  readonly replicaId: string;
  /** Model name. */
  readonly model: string;
  readonly nodeId: string;
  readonly gpuIndices: readonly number[];
  readonly memoryBytes?: number;
}

/**
 * The fleet as placement sees it. Node ids are unique; an allocation naming a node that is not
 * listed is ignored. Node order carries no meaning: results depend on node ids, never on order.
 */
export interface Inventory {
  readonly nodes: readonly NodeInfo[];
  readonly allocations: readonly Allocation[];
}

/** Why one profile did not fit: on one node (`nodeId`), or for the profile as a whole. */
export interface PlacementReason {
  readonly profileIndex: number;
  readonly nodeId?: string;
  /** Human-readable, e.g. `needs 2 free GPUs, has 1` or `disk: needs 16.0 GB, 9.2 GB free`. */
  readonly reason: string;
}

/** Where a replica goes (members rank 0 first, GPU indices ascending), or why it fits nowhere. */
export type PlacementResult =
  | { readonly ok: true; readonly profileIndex: number; readonly members: ReplicaMember[] }
  | { readonly ok: false; readonly reasons: PlacementReason[]; readonly summary: string };
