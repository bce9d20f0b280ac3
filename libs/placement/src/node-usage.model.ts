import type { Allocation } from './placement.types';

/** What the allocations hold on one node. */
export interface NodeUsage {
  /** GPU indices held by any replica, each once (whole GPUs; never shared). */
  readonly gpus: number[];
  /** Host memory reserved by allocations that state it, bytes. */
  memoryBytes: number;
  /** Allocations holding no GPU (CPU replicas), of any model. */
  cpuReplicas: number;
  /**
   * Model name of each allocation on the node (a handful; counted by scanning): how many replicas
   * of a model a node holds, which placement spreads on for GPU and CPU profiles alike.
   */
  readonly models: string[];
}

/** Indexes allocations by node id in one pass, O(allocations). */
export function usageByNode(allocations: readonly Allocation[]): Map<string, NodeUsage> {
  const byNode = new Map<string, NodeUsage>();
  for (const a of allocations) {
    let u = byNode.get(a.nodeId);
    if (!u) {
      u = { gpus: [], memoryBytes: 0, cpuReplicas: 0, models: [] };
      byNode.set(a.nodeId, u);
    }
    add(u, a);
  }
  return byNode;
}

/** A node's usage with one more allocation; the input is left alone. */
export function addUsage(u: NodeUsage | undefined, a: Allocation): NodeUsage {
  const next: NodeUsage = {
    gpus: u ? [...u.gpus] : [],
    memoryBytes: u?.memoryBytes ?? 0,
    cpuReplicas: u?.cpuReplicas ?? 0,
    models: u ? [...u.models] : [],
  };
  add(next, a);
  return next;
}

function add(u: NodeUsage, a: Allocation): void {
  for (const g of a.gpuIndices) if (!u.gpus.includes(g)) u.gpus.push(g);
  if (a.memoryBytes !== undefined) u.memoryBytes += a.memoryBytes;
  if (a.gpuIndices.length === 0) u.cpuReplicas++;
  u.models.push(a.model);
}

/** Allocations of `model` on the node. */
export function countOf(u: NodeUsage, model: string): number {
  let n = 0;
  for (const m of u.models) if (m === model) n++;
  return n;
}

/** Orders node ids by UTF-16 code units: the same on every machine and locale. */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
