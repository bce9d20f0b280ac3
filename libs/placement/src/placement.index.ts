import type { Model } from '@llmgw/domain';
import { withAllocation as addToInventory } from './allocation.reducer';
import { InventoryView, sortPositions } from './fleet.view';
import { makeSlot, SlotView, type NodeSlot } from './node-slot.model';
import { addUsage, usageByNode } from './node-usage.model';
import { placeOnView } from './placement.planner';
import type { Inventory, PlacementRequest, PlacementResult } from './placement.types';

/**
 * An inventory prepared for placing many replicas: each node's fit data computed once, so a
 * `place()` costs O(nodes) cheap checks instead of O(nodes × GPUs + allocations). Immutable:
 * `withAllocation` returns a new index that recomputes only the member nodes and shares the rest
 * (each slot's usage carries the node's allocations by model, which the spread rule counts).
 * Gives exactly the results of `place(request, index.inventory)`.
 */
export class PlacementIndex {
  private constructor(
    /** The inventory this index describes (with every allocation added through it). */
    readonly inventory: Inventory,
    private readonly slots: readonly NodeSlot[],
    private readonly positions: ReadonlyMap<string, number>,
    /** Slot positions sorted by node id; computed on the first refusal, shared by derived indexes. */
    private readonly order: { byId?: readonly number[] },
  ) {}

  /** O(nodes × GPUs per node + allocations). Node ids must be unique. */
  static build(inventory: Inventory): PlacementIndex {
    const usage = usageByNode(inventory.allocations);
    const slots = inventory.nodes.map((n) => makeSlot(n, usage.get(n.id)));
    const positions = new Map(inventory.nodes.map((n, i) => [n.id, i] as const));
    return new PlacementIndex(inventory, slots, positions, {});
  }

  /** Where one replica of `request.model` goes; see `place`. */
  place(request: PlacementRequest): PlacementResult {
    return placeOnView(request, new SlotView(this.slots, () => this.byId()));
  }

  /**
   * The index after a placed replica (a failed result returns this index). Takes the request to
   * reserve disk for the weights as `withAllocation` on an inventory does. O(nodes) pointer
   * copies plus O(GPUs) per member node.
   */
  withAllocation(replicaId: string, modelOrRequest: Model | PlacementRequest, result: PlacementResult): PlacementIndex {
    if (!result.ok) return this;
    const inventory = addToInventory(this.inventory, replicaId, modelOrRequest, result);
    const added = inventory.allocations.slice(this.inventory.allocations.length);
    const slots = this.slots.slice();
    for (const a of added) {
      const i = this.positions.get(a.nodeId);
      if (i === undefined) continue;
      // The reducer keeps node positions, so inventory.nodes[i] is this node's new record.
      slots[i] = makeSlot(inventory.nodes[i], addUsage(slots[i].usage, a));
    }
    return new PlacementIndex(inventory, slots, this.positions, this.order);
  }

  private byId(): readonly number[] {
    this.order.byId ??= sortPositions(this.inventory.nodes);
    return this.order.byId;
  }
}

/**
 * Chooses where one replica of `request.model` goes: profiles in catalog order, the first that
 * fits wins. Among nodes that fit, those holding the fewest replicas of the model come first (a
 * soft spread: a node already holding one is still used when nothing else fits); then GPU
 * replicas bin-pack (fewest free GPUs left, weights held, id) and CPU replicas spread. Pure and deterministic: equal inputs give equal results whatever the order of
 * `inventory.nodes` or `inventory.allocations` (ties end on node id). When nothing fits, the
 * result lists every profile's reasons, per node (by id) where they are per node.
 * O(allocations + nodes × GPUs per node) per call, allocating little; to place many replicas
 * against one fleet, a `PlacementIndex` answers the same in O(nodes).
 */
export function place(request: PlacementRequest, inventory: Inventory): PlacementResult {
  return placeOnView(request, new InventoryView(inventory));
}
