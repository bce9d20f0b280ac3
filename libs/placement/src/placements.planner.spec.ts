import type { Replica } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { PlacementIndex } from './placement.index';
import { allocationsOf, planPlacements } from './placements.planner';
import { gpuProfile, model as fleetModel, node } from './test/fleet.builder';

const model = fleetModel('m', [gpuProfile('L4', 1)]);

describe('planPlacements', () => {
  it('places replicas one after the other, each taking its room, and stops at the first that fits nowhere', () => {
    const index = PlacementIndex.build({ nodes: [node('a', 2, 'L4'), node('b', 1, 'L4')], allocations: [] });
    const plan = planPlacements(index, { model }, 5, (i) => `r${i}`);
    expect(plan.placed.map((p) => p.replicaId)).toEqual(['r0', 'r1', 'r2']);
    const gpus = plan.placed.flatMap((p) => p.result.members.flatMap((m) => m.gpuIndices.map((g) => `${m.nodeId}/${g}`)));
    expect(new Set(gpus).size).toBe(3);
    expect(plan.refused?.summary).toContain('m');
    expect(plan.index.inventory.allocations).toHaveLength(3);
    expect(index.inventory.allocations).toHaveLength(0);
  });

  it('names only the replicas it placed', () => {
    const seen: number[] = [];
    planPlacements(PlacementIndex.build({ nodes: [node('a', 1, 'L4')], allocations: [] }), { model }, 3, (i) => (seen.push(i), `r${i}`));
    expect(seen).toEqual([0]);
  });

  it('counts the replicas that hold resources, with the host memory their profile reserves', () => {
    const replicas = [
      { id: 'x', model: 'm', profileIndex: 0, state: 'ready', members: [{ nodeId: 'a', gpuIndices: [1] }] },
      { id: 'y', model: 'm', profileIndex: 0, state: 'failed', members: [{ nodeId: 'a', gpuIndices: [0] }] },
      { id: 'z', model: 'gone', profileIndex: 0, state: 'ready', members: [{ nodeId: 'b', gpuIndices: [0] }] },
    ] as unknown as Replica[];
    const allocations = allocationsOf(replicas, (name) => (name === 'm' ? model : undefined), (s) => s !== 'failed');
    expect(allocations.map((a) => [a.replicaId, a.nodeId, a.gpuIndices])).toEqual([
      ['x', 'a', [1]],
      ['z', 'b', [0]],
    ]);
  });
});
