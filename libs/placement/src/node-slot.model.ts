import type { NodeInfo } from '@llmgw/domain';
import { EMPTY_USAGE, type FleetView, type GpuFacts } from './fleet.view';
import type { NodeUsage } from './node-usage.model';

/** One GPU class on one node, precomputed for placement. */
export interface ClassSlot {
  readonly gpuClass: string;
  /** GPUs of the class on the node. */
  readonly total: number;
  readonly unhealthy: number;
  /** Free memory (total − used, or total when used is unknown) of each healthy unallocated GPU, descending. */
  readonly freeMemory: readonly number[];
}

/**
 * One node as placement sees it: what a fit check needs, computed once from the node and its
 * allocations, so a check costs O(GPU classes on the node) instead of O(GPUs). Immutable.
 */
export interface NodeSlot {
  readonly node: NodeInfo;
  /** Healthy unallocated GPUs of any class. */
  readonly freeAny: number;
  readonly classes: readonly ClassSlot[];
  readonly usage: NodeUsage;
}

/** Builds a node's slot, O(GPUs on the node). `usage` absent = nothing allocated there. */
export function makeSlot(node: NodeInfo, usage: NodeUsage = EMPTY_USAGE): NodeSlot {
  const classes: { gpuClass: string; total: number; unhealthy: number; freeMemory: number[] }[] = [];
  let freeAny = 0;
  const held = usage.gpus;
  const gpus = node.gpus;
  for (let i = 0; i < gpus.length; i++) {
    const gpu = gpus[i];
    // Nodes mostly carry one class: the last entry is nearly always the one.
    let c = classes.length ? classes[classes.length - 1] : undefined;
    if (!c || c.gpuClass !== gpu.gpuClass) {
      c = undefined;
      for (let k = 0; k < classes.length; k++) if (classes[k].gpuClass === gpu.gpuClass) c = classes[k];
      if (!c) {
        c = { gpuClass: gpu.gpuClass, total: 0, unhealthy: 0, freeMemory: [] };
        classes.push(c);
      }
    }
    c.total++;
    if (!gpu.healthy) c.unhealthy++;
    else if (held.length === 0 || !held.includes(gpu.index)) {
      freeAny++;
      insertDescending(c.freeMemory, gpu.memoryTotalBytes - (gpu.memoryUsedBytes ?? 0));
    }
  }
  return { node, freeAny, classes, usage };
}

/** Insertion into a short descending list: cheaper than a sort call per node. */
function insertDescending(list: number[], value: number): void {
  let i = list.length;
  list.push(value);
  while (i > 0 && list[i - 1] < value) {
    list[i] = list[i - 1];
    i--;
  }
  list[i] = value;
}

/** Slots read as a fleet: each check is a lookup, not a GPU scan. */
export class SlotView implements FleetView {
  constructor(
    private readonly slots: readonly NodeSlot[],
    private readonly order: () => readonly number[],
  ) {}

  get size(): number {
    return this.slots.length;
  }

  node(i: number): NodeInfo {
    return this.slots[i].node;
  }

  usage(i: number): NodeUsage {
    return this.slots[i].usage;
  }

  gpuFacts(i: number, want: string, memoryPerGpu: number, out: GpuFacts): void {
    const slot = this.slots[i];
    out.freeAny = slot.freeAny;
    const cs = slot.classes;
    for (let k = 0; k < cs.length; k++) {
      const c = cs[k];
      if (c.gpuClass !== want) continue;
      const free = c.freeMemory;
      // Descending: count from the top while memory suffices.
      let fitting = 0;
      while (fitting < free.length && free[fitting] >= memoryPerGpu) fitting++;
      out.ofClass = c.total;
      out.unhealthy = c.unhealthy;
      out.free = free.length;
      out.fitting = fitting;
      return;
    }
    out.ofClass = 0;
    out.unhealthy = 0;
    out.free = 0;
    out.fitting = 0;
  }

  orderById(): readonly number[] {
    return this.order();
  }
}
