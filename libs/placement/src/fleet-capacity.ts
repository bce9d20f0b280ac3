import type { NodeInfo } from '@llmgw/domain';
import { PlacementIndex } from './placement.index';
import type { PlacementRequest } from './placement.types';

/**
 * How many replicas of `request.model` the nodes could ever hold, counted up to `limit`: every
 * node as if healthy, uncordoned and running nothing (every GPU healthy and empty), with the
 * disk not counted (a cache can be collected). A model that wants more than this can never be
 * satisfied on this fleet, however long it waits. Places replica by replica with the one
 * placement rule, so it agrees with what placement would do on an empty fleet.
 * O(min(limit, capacity) × nodes).
 */
export function fleetCapacity(request: PlacementRequest, nodes: readonly NodeInfo[], limit: number): number {
  const ideal = nodes.map(
    (n): NodeInfo => ({
      ...n,
      state: 'healthy',
      cordoned: false,
      gpus: n.gpus.map(({ memoryUsedBytes: _used, ...gpu }) => ({ ...gpu, healthy: true })),
    }),
  );
  const bare: PlacementRequest = { model: request.model };
  let index = PlacementIndex.build({ nodes: ideal, allocations: [] });
  let count = 0;
  while (count < limit) {
    const result = index.place(bare);
    if (!result.ok) break;
    index = index.withAllocation(`capacity-${count}`, bare, result);
    count++;
  }
  return count;
}
