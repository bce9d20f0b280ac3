import { describe, expect, it } from 'vitest';
import { capacityByClass, freeNodesByFabric } from './capacity.summary';
import { gpu, node } from './test/fleet.builder';

describe('capacityByClass', () => {
  it('puts every GPU in exactly one bucket; unhealthy is neither used nor free', () => {
    const inventory = {
      nodes: [
        node('a', 0, 'x', { gpus: [gpu(0), gpu(1), gpu(2, 'H100', { healthy: false }), gpu(3, 'H100', { healthy: false })] }),
        node('b', 2, 'H100', { cordoned: true }),
        node('c', 2, 'H100', { state: 'lost' }),
        node('d', 1, 'A100'),
        node('e', 0),
      ],
      allocations: [
        { replicaId: 'r1', model: 'm', nodeId: 'a', gpuIndices: [0, 3] },
        { replicaId: 'r2', model: 'm', nodeId: 'c', gpuIndices: [1] },
        { replicaId: 'r3', model: 'cpu', nodeId: 'e', gpuIndices: [] },
      ],
    };
    expect(capacityByClass(inventory)).toEqual([
      { gpuClass: 'A100', total: 1, used: 0, free: 1, unhealthy: 0, unavailable: 0 },
      // a: 0 used, 1 free, 2+3 unhealthy (3 is allocated but still unhealthy); b: 2 unavailable;
      // c: 1 used (held on a lost node), 1 unavailable.
      { gpuClass: 'H100', total: 8, used: 2, free: 1, unhealthy: 2, unavailable: 3 },
    ]);
  });

  it('is empty for a fleet without GPUs', () => {
    expect(capacityByClass({ nodes: [node('a', 0)], allocations: [] })).toEqual([]);
  });
});

describe('freeNodesByFabric', () => {
  it('counts healthy uncordoned nodes whose GPUs are all healthy and free', () => {
    const f = (id: string, fabric: string, over = {}) => node(id, 2, 'H100', { fabric, ...over });
    const inventory = {
      nodes: [
        f('a1', 'ib-a'),
        f('a2', 'ib-a'),
        f('a3', 'ib-a', { cordoned: true }),
        f('a4', 'ib-a', { state: 'unreachable' }),
        node('a5', 0, 'x', { fabric: 'ib-a', gpus: [gpu(0), gpu(1, 'H100', { healthy: false })] }),
        f('b1', 'ib-b'),
        node('cpu', 0, 'x', { fabric: 'ib-b' }),
        node('nofabric', 8),
      ],
      allocations: [
        { replicaId: 'r1', model: 'm', nodeId: 'a2', gpuIndices: [1] },
        { replicaId: 'r2', model: 'cpu', nodeId: 'b1', gpuIndices: [] },
      ],
    };
    expect(freeNodesByFabric(inventory)).toEqual([
      { fabric: 'ib-a', nodes: 5, freeNodes: 1 },
      { fabric: 'ib-b', nodes: 1, freeNodes: 1 },
    ]);
  });
});
