import type { Model, Replica, ReplicaState } from '@llmgw/domain';
import type { PlacementIndex } from './placement.index';
import type { Allocation, PlacementReason, PlacementRequest, PlacementResult } from './placement.types';
import { hostMemoryOf } from './replica-footprint';

/** One replica a plan placed, under the id the caller gave it. */
export interface PlannedPlacement {
  readonly replicaId: string;
  readonly result: PlacementResult & { ok: true };
}

/** What placing some replicas of one model did. */
export interface PlacementsPlan {
  /** The index with every placed replica's room taken. */
  readonly index: PlacementIndex;
  readonly placed: readonly PlannedPlacement[];
  /** Why the next replica fit nowhere; absent when all `count` were placed. */
  readonly refused?: { readonly summary: string; readonly reasons: readonly PlacementReason[] };
}

/**
 * Places up to `count` replicas of one model through `index`, one after the other, each taking
 * its GPUs, memory and disk before the next is placed; stops at the first that fits nowhere, since
 * every later one would be refused the same way. The one loop behind the reconciler, the catalog
 * API's placement preview and `llmgw plan`. Pure: `replicaId(i)` names the i-th placement.
 */
export function planPlacements(index: PlacementIndex, request: PlacementRequest, count: number, replicaId: (i: number) => string): PlacementsPlan {
  let current = index;
  const placed: PlannedPlacement[] = [];
  for (let i = 0; i < count; i++) {
    const result = current.place(request);
    if (!result.ok) return { index: current, placed, refused: { summary: result.summary, reasons: result.reasons } };
    const id = replicaId(i);
    placed.push({ replicaId: id, result });
    current = current.withAllocation(id, request, result);
  }
  return { index: current, placed };
}

/**
 * The allocations of the replicas that still hold resources (`holds(state)`): each member's GPUs,
 * and the host memory its profile reserves (CPU replicas), found through `modelOf` (undefined:
 * the model is gone from the catalog, so only the GPUs are known).
 */
export function allocationsOf(replicas: Iterable<Replica>, modelOf: (name: string) => Model | undefined, holds: (state: ReplicaState) => boolean): Allocation[] {
  const allocations: Allocation[] = [];
  for (const r of replicas) {
    if (!holds(r.state)) continue;
    const model = modelOf(r.model);
    const profile = model?.profiles[r.profileIndex];
    const reserved = model && profile ? hostMemoryOf(model, profile) : 0;
    for (const m of r.members) {
      allocations.push({ replicaId: r.id, model: r.model, nodeId: m.nodeId, gpuIndices: [...m.gpuIndices], ...(reserved > 0 ? { memoryBytes: reserved } : {}) });
    }
  }
  return allocations;
}
