import type { NodeInfo } from '@llmgw/domain';
import { compareIds, usageByNode, type NodeUsage } from './node-usage.model';
import type { Inventory } from './placement.types';

/** One node's GPUs of one class, as a fit check sees them. Written into a reused object. */
export interface GpuFacts {
  /** GPUs of the class on the node. */
  ofClass: number;
  unhealthy: number;
  /** Healthy, unallocated GPUs of the class. */
  free: number;
  /** Of those, the ones with enough free memory. */
  fitting: number;
  /** Healthy, unallocated GPUs of any class. */
  freeAny: number;
}

/**
 * The fleet as the planner reads it, by position. Two sources give the same answers: a plain
 * inventory scanned per call (`InventoryView`) and a prepared `PlacementIndex`.
 */
export interface FleetView {
  readonly size: number;
  node(i: number): NodeInfo;
  usage(i: number): NodeUsage;
  /** Fills `out` for GPUs of class `want` needing at least `memoryPerGpu` bytes free. */
  gpuFacts(i: number, want: string, memoryPerGpu: number, out: GpuFacts): void;
  /** Positions sorted by node id (for the reason pass). */
  orderById(): readonly number[];
}

export const EMPTY_USAGE: NodeUsage = Object.freeze({ gpus: [], memoryBytes: 0, cpuReplicas: 0, models: [] });

/** Positions 0..n-1 sorted by the node ids at them. */
export function sortPositions(nodes: readonly NodeInfo[]): number[] {
  return nodes.map((_, i) => i).sort((a, b) => compareIds(nodes[a].id, nodes[b].id));
}

/** A plain inventory read directly: O(allocations) to set up, then each check scans a node's GPUs. */
export class InventoryView implements FleetView {
  readonly size: number;
  private readonly usages: (NodeUsage | undefined)[];

  constructor(private readonly inventory: Inventory) {
    const nodes = inventory.nodes;
    this.size = nodes.length;
    const byNode = usageByNode(inventory.allocations);
    this.usages = new Array(nodes.length);
    for (let i = 0; i < nodes.length; i++) this.usages[i] = byNode.size ? byNode.get(nodes[i].id) : undefined;
  }

  node(i: number): NodeInfo {
    return this.inventory.nodes[i];
  }

  usage(i: number): NodeUsage {
    return this.usages[i] ?? EMPTY_USAGE;
  }

  gpuFacts(i: number, want: string, memoryPerGpu: number, out: GpuFacts): void {
    const gpus = this.inventory.nodes[i].gpus;
    const held = this.usages[i]?.gpus;
    let ofClass = 0;
    let unhealthy = 0;
    let free = 0;
    let fitting = 0;
    let freeAny = 0;
    for (let k = 0; k < gpus.length; k++) {
      const gpu = gpus[k];
      if (!gpu.healthy) {
        if (gpu.gpuClass === want) {
          ofClass++;
          unhealthy++;
        }
        continue;
      }
      if (held !== undefined && held.includes(gpu.index)) {
        if (gpu.gpuClass === want) ofClass++;
        continue;
      }
      freeAny++;
      if (gpu.gpuClass !== want) continue;
      ofClass++;
      free++;
      if (gpu.memoryTotalBytes - (gpu.memoryUsedBytes ?? 0) >= memoryPerGpu) fitting++;
    }
    out.ofClass = ofClass;
    out.unhealthy = unhealthy;
    out.free = free;
    out.fitting = fitting;
    out.freeAny = freeAny;
  }

  orderById(): readonly number[] {
    return sortPositions(this.inventory.nodes);
  }
}
