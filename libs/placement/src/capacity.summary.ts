import { compareIds, usageByNode } from './node-usage.model';
import type { Inventory } from './placement.types';

/**
 * GPUs of one class across the fleet. Every GPU lands in exactly one bucket, so
 * `total = used + free + unhealthy + unavailable`:
 * - `unhealthy`: the GPU reports unhealthy, allocated or not (neither used nor free: counting
 *   it free is how a cluster looks like it has room it does not);
 * - `used`: healthy and held by a replica, whatever the node's state;
 * - `free`: healthy, unallocated, on a healthy uncordoned node — room a new replica can take;
 * - `unavailable`: healthy, unallocated, on a node that takes no new replicas (cordoned,
 *   unreachable or lost) — there, but not room.
 */
export interface ClassCapacity {
  readonly gpuClass: string;
  readonly total: number;
  readonly used: number;
  readonly free: number;
  readonly unhealthy: number;
  readonly unavailable: number;
}

/** Free whole nodes of one fabric: what decides whether a multi-node replica can land there. */
export interface FabricCapacity {
  readonly fabric: string;
  /** Nodes in the fabric that have at least one GPU, whatever their state. */
  readonly nodes: number;
  /** Healthy, uncordoned nodes whose GPUs are all healthy and unallocated. */
  readonly freeNodes: number;
}

/** Capacity per GPU class, sorted by class. */
export function capacityByClass(inventory: Inventory): ClassCapacity[] {
  const usage = usageByNode(inventory.allocations);
  const byClass = new Map<string, { total: number; used: number; free: number; unhealthy: number; unavailable: number }>();
  for (const node of inventory.nodes) {
    const held = usage.get(node.id)?.gpus;
    const placeable = node.state === 'healthy' && !node.cordoned;
    for (const gpu of node.gpus) {
      let c = byClass.get(gpu.gpuClass);
      if (!c) {
        c = { total: 0, used: 0, free: 0, unhealthy: 0, unavailable: 0 };
        byClass.set(gpu.gpuClass, c);
      }
      c.total++;
      if (!gpu.healthy) c.unhealthy++;
      else if (held?.includes(gpu.index)) c.used++;
      else if (placeable) c.free++;
      else c.unavailable++;
    }
  }
  return [...byClass]
    .sort((a, b) => compareIds(a[0], b[0]))
    .map(([gpuClass, c]) => ({ gpuClass, ...c }));
}

/**
 * Free whole nodes per fabric, sorted by fabric. Nodes without a fabric, and nodes without
 * GPUs, are not counted: neither can take part in a multi-node replica.
 */
export function freeNodesByFabric(inventory: Inventory): FabricCapacity[] {
  const usage = usageByNode(inventory.allocations);
  const byFabric = new Map<string, { nodes: number; freeNodes: number }>();
  for (const node of inventory.nodes) {
    if (node.fabric === undefined || node.gpus.length === 0) continue;
    let f = byFabric.get(node.fabric);
    if (!f) {
      f = { nodes: 0, freeNodes: 0 };
      byFabric.set(node.fabric, f);
    }
    f.nodes++;
    const held = usage.get(node.id)?.gpus ?? [];
    const whole = node.gpus.every((g) => g.healthy && !held.includes(g.index));
    if (node.state === 'healthy' && !node.cordoned && whole) f.freeNodes++;
  }
  return [...byFabric]
    .sort((a, b) => compareIds(a[0], b[0]))
    .map(([fabric, f]) => ({ fabric, ...f }));
}
