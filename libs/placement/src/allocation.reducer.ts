import type { Model, NodeInfo } from '@llmgw/domain';
import type { Allocation, Inventory, PlacementRequest, PlacementResult } from './placement.types';
import { hostMemoryOf } from './replica-footprint';

/**
 * Returns a new inventory with a placed replica's members added as allocations, so callers can
 * place many replicas in sequence. Given the request (not only the model), it also reserves the
 * disk the weights will take on member nodes that do not hold them yet: free cache space shrinks
 * by `model.sizeBytes` and a planned cache entry (`modifiedAt` 0) is added, so a later placement
 * neither counts that space twice nor asks for it again. A failed result changes nothing. The
 * input is never modified.
 */
export function withAllocation(
  inventory: Inventory,
  replicaId: string,
  modelOrRequest: Model | PlacementRequest,
  result: PlacementResult,
): Inventory {
  if (!result.ok) return inventory;
  const request: PlacementRequest = 'model' in modelOrRequest ? modelOrRequest : { model: modelOrRequest };
  const model = request.model;
  const profile = model.profiles[result.profileIndex];
  const reserved = profile ? hostMemoryOf(model, profile) : 0;
  const memoryBytes = reserved > 0 ? reserved : undefined;
  const added: Allocation[] = result.members.map((m) => ({
    replicaId,
    model: model.name,
    nodeId: m.nodeId,
    gpuIndices: [...m.gpuIndices],
    ...(memoryBytes !== undefined ? { memoryBytes } : {}),
  }));
  const allocations = [...inventory.allocations, ...added];
  const name = request.cacheName;
  if (name === undefined) return { nodes: inventory.nodes, allocations };

  const memberIds = new Set(result.members.map((m) => m.nodeId));
  let changed = false;
  const nodes = inventory.nodes.map((node): NodeInfo => {
    if (!memberIds.has(node.id) || node.cache.entries.some((e) => e.name === name)) return node;
    changed = true;
    return {
      ...node,
      cache: {
        ...node.cache,
        freeBytes: node.cache.freeBytes - model.sizeBytes,
        entries: [...node.cache.entries, { name, sizeBytes: model.sizeBytes, modifiedAt: 0 }],
      },
    };
  });
  return { nodes: changed ? nodes : inventory.nodes, allocations };
}
