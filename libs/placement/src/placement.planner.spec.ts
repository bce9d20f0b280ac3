import type { NodeInfo } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { withAllocation } from './allocation.reducer';
import { place, PlacementIndex } from './placement.index';
import type { Allocation, Inventory, PlacementRequest, PlacementResult } from './placement.types';
import { cpuProfile, GB, gpu, gpuProfile, model, node, withCache } from './test/fleet.builder';

const CACHE = 'llmgw-0123456789abcdef-m';

function inv(nodes: NodeInfo[], allocations: Allocation[] = []): Inventory {
  return { nodes, allocations };
}

function alloc(nodeId: string, gpuIndices: number[], over: Partial<Allocation> = {}): Allocation {
  return { replicaId: `r-${nodeId}-${gpuIndices.join('.')}`, model: 'other', nodeId, gpuIndices, ...over };
}

function reasonsOf(r: PlacementResult): string[] {
  if (r.ok) throw new Error(`expected unplaceable, got ${JSON.stringify(r)}`);
  return r.reasons.map((x) => (x.nodeId ? `${x.profileIndex}/${x.nodeId}: ${x.reason}` : `${x.profileIndex}: ${x.reason}`));
}

function nodesOf(r: PlacementResult): string[] {
  if (!r.ok) throw new Error(`expected placed, got ${r.summary}`);
  return r.members.map((m) => m.nodeId);
}

const h100x2 = model('m', [gpuProfile('H100', 2)]);
const h100x1 = model('m', [gpuProfile('H100', 1)]);

describe('place: one reason per profile and node', () => {
  it.each<[string, PlacementRequest, Inventory, string[]]>([
    ['class mismatch', { model: h100x2 }, inv([node('a', 8, 'A100')]), ['0/a: wants class H100, node has A100']],
    [
      'class mismatch lists every class once, sorted',
      { model: h100x2 },
      inv([node('a', 0, 'x', { gpus: [gpu(0, 'L4'), gpu(1, 'A100'), gpu(2, 'L4')] })]),
      ['0/a: wants class H100, node has A100, L4'],
    ],
    ['GPU profile on a CPU-only node', { model: h100x2 }, inv([node('a', 0)]), ['0/a: wants class H100, node has no GPUs']],
    [
      'too few free GPUs',
      { model: h100x2 },
      inv([node('a', 2)], [alloc('a', [1])]),
      ['0/a: needs 2 free GPUs, has 1'],
    ],
    ['singular GPU wording', { model: h100x1 }, inv([node('a', 1)], [alloc('a', [0])]), ['0/a: needs 1 free GPU, has 0']],
    [
      'unhealthy GPUs are not free, and say so',
      { model: h100x2 },
      inv([node('a', 0, 'x', { gpus: [gpu(0), gpu(1, 'H100', { healthy: false })] })]),
      ['0/a: needs 2 free GPUs, has 1 (1 unhealthy)'],
    ],
    [
      'GPU memory in use by something else',
      { model: model('m', [gpuProfile('H100', 1, { memoryPerGpuBytes: 40 * GB })]) },
      inv([node('a', 0, 'x', { gpus: [gpu(0, 'H100', { memoryUsedBytes: 50 * GB })] })]),
      ['0/a: needs 1 GPU with 40.0 GB free memory, has 0'],
    ],
    [
      'disk too small for the weights',
      { model: h100x2, cacheName: CACHE },
      inv([withCache(node('a'), 9.2 * GB)]),
      ['0/a: disk: needs 16.0 GB, 9.2 GB free'],
    ],
    ['cordoned', { model: h100x2 }, inv([node('a', 8, 'H100', { cordoned: true })]), ['0/a: node cordoned']],
    ['unreachable', { model: h100x2 }, inv([node('a', 8, 'H100', { state: 'unreachable' })]), ['0/a: node unreachable']],
    ['lost', { model: h100x2 }, inv([node('a', 8, 'H100', { state: 'lost' })]), ['0/a: node lost']],
    [
      'multi-node needs a fabric',
      { model: model('m', [gpuProfile('H100', 8, { nodes: 2 })]) },
      inv([node('a'), node('b')]),
      ['0/a: no fabric (multi-node)', '0/b: no fabric (multi-node)'],
    ],
    [
      'multi-node fabric too small',
      { model: model('m', [gpuProfile('H100', 8, { nodes: 2 })]) },
      inv([node('a', 8, 'H100', { fabric: 'ib-a' }), node('b', 8, 'H100', { fabric: 'ib-b' })]),
      ['0: only 1 node with 8 free GPUs in fabric ib-a, needs 2', '0: only 1 node with 8 free GPUs in fabric ib-b, needs 2'],
    ],
    [
      'CPU host memory',
      { model: model('m', [cpuProfile({ memoryBytes: 8 * GB })]) },
      inv([node('a', 0, 'x', { memoryBytes: 12 * GB })], [alloc('a', [], { memoryBytes: 8 * GB })]),
      ['0/a: memory: needs 8.0 GB, 4.0 GB free'],
    ],
    [
      'CPU disk',
      { model: model('m', [cpuProfile()]), cacheName: CACHE },
      inv([withCache(node('a', 0), 1 * GB)]),
      ['0/a: disk: needs 16.0 GB, 1.0 GB free'],
    ],
    ['CPU cordoned', { model: model('m', [cpuProfile()]) }, inv([node('a', 0, 'x', { cordoned: true })]), ['0/a: node cordoned']],
    ['CPU multi-node', { model: model('m', [cpuProfile({ nodes: 2 })]) }, inv([node('a', 0)]), ['0: CPU profiles run on one node']],
    ['no nodes', { model: h100x2 }, inv([]), ['0: no nodes in inventory']],
    [
      'every profile, in catalog order, nodes by id',
      { model: model('m', [gpuProfile('H100', 2), gpuProfile('A100', 1)]) },
      inv([node('b', 1, 'H100'), node('a', 1, 'L4')]),
      [
        '0/a: wants class H100, node has L4',
        '0/b: needs 2 free GPUs, has 1',
        '1/a: wants class A100, node has L4',
        '1/b: wants class A100, node has H100',
      ],
    ],
  ])('%s', (_name, request, inventory, expected) => {
    expect(reasonsOf(place(request, inventory))).toEqual(expected);
  });

  it('checks state before cordon before fabric before GPUs', () => {
    const p = model('m', [gpuProfile('H100', 8, { nodes: 2 })]);
    const r = place({ model: p }, inv([node('a', 0, 'x', { state: 'lost', cordoned: true })]));
    expect(reasonsOf(r)).toEqual(['0/a: node lost']);
  });

  it('summarises grouped reasons per profile, largest group first', () => {
    const nodes = ['n1', 'n2', 'n3', 'n4', 'n5'].map((id) => node(id, 8, 'A100'));
    nodes.push(node('n0', 8, 'H100', { cordoned: true }));
    const r = place({ model: model('big', [gpuProfile('H100', 2), cpuProfile({ memoryBytes: 1000 * GB })]) }, inv(nodes));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.summary).toBe(
      [
        'model big: no profile fits',
        '  profile 0 (vllm 2×H100):',
        '    wants class H100, node has A100: 5 nodes (n1, n2, n3, +2 more)',
        '    node cordoned: n0',
        '  profile 1 (llamacpp CPU):',
        '    memory: needs 1000.0 GB, 512.0 GB free: 5 nodes (n1, n2, n3, +2 more)',
        '    node cordoned: n0',
      ].join('\n'),
    );
  });

  it('says a model without profiles has none', () => {
    const r = place({ model: model('m', []) }, inv([node('a')]));
    expect(r).toEqual({ ok: false, reasons: [], summary: 'model m: has no profiles' });
  });
});

describe('place: fit rules', () => {
  it('takes the lowest fitting GPU indices, ascending, whatever the GPU order', () => {
    const gpus = [gpu(5), gpu(3, 'H100', { healthy: false }), gpu(1), gpu(0), gpu(2, 'H100', { memoryUsedBytes: 79 * GB })];
    const r = place(
      { model: model('m', [gpuProfile('H100', 2, { memoryPerGpuBytes: 10 * GB })]) },
      inv([node('a', 0, 'x', { gpus })], [alloc('a', [0])]),
    );
    expect(r).toEqual({ ok: true, profileIndex: 0, members: [{ nodeId: 'a', rank: 0, gpuIndices: [1, 5] }] });
  });

  it('counts a GPU with unknown used memory as wholly free', () => {
    const r = place({ model: model('m', [gpuProfile('H100', 1, { memoryPerGpuBytes: 80 * GB })]) }, inv([node('a', 1)]));
    expect(r.ok).toBe(true);
  });

  it('skips the disk check on a node that already holds the weights', () => {
    const r = place({ model: h100x2, cacheName: CACHE }, inv([withCache(node('a'), 0, [CACHE])]));
    expect(nodesOf(r)).toEqual(['a']);
  });

  it('skips the disk check for file:// sources (no cache name)', () => {
    const r = place({ model: h100x2 }, inv([withCache(node('a'), 0)]));
    expect(nodesOf(r)).toEqual(['a']);
  });

  it('tries profiles in catalog order: the first that fits wins', () => {
    const m = model('m', [gpuProfile('H100', 8), gpuProfile('H100', 2), gpuProfile('H100', 1)]);
    const r = place({ model: m }, inv([node('a', 4)]));
    expect(r.ok && r.profileIndex).toBe(1);
  });

  it('checks host memory for GPU profiles that state it', () => {
    const m = model('m', [gpuProfile('H100', 1, { memoryBytes: 600 * GB })]);
    expect(reasonsOf(place({ model: m }, inv([node('a', 1)])))).toEqual(['0/a: memory: needs 600.0 GB, 512.0 GB free']);
  });

  it('ignores allocations on nodes not in the inventory', () => {
    expect(nodesOf(place({ model: h100x2 }, inv([node('a', 2)], [alloc('ghost', [0, 1])])))).toEqual(['a']);
  });
});

describe('place: GPU bin-packing tie-breaks', () => {
  it('picks the node left with the fewest free GPUs that still fits', () => {
    const r = place({ model: h100x2 }, inv([node('a', 8), node('b', 4), node('c', 2, 'H100'), node('d', 1)]));
    expect(nodesOf(r)).toEqual(['c']);
  });

  it('counts free GPUs of every class when packing', () => {
    // b has 2 H100 + 4 idle L4: leaves 4 free; a leaves 3.
    const b = node('b', 0, 'x', { gpus: [gpu(0), gpu(1), gpu(2, 'L4'), gpu(3, 'L4'), gpu(4, 'L4'), gpu(5, 'L4')] });
    expect(nodesOf(place({ model: h100x2 }, inv([node('a', 5), b])))).toEqual(['a']);
  });

  it('then prefers the node that already holds the weights', () => {
    const r = place({ model: h100x2, cacheName: CACHE }, inv([node('a', 4), withCache(node('b', 4), 100 * GB, [CACHE])]));
    expect(nodesOf(r)).toEqual(['b']);
  });

  it('then the lowest node id, whatever the node order', () => {
    const nodes = [node('n10', 4), node('n02', 4), node('n2', 4)];
    expect(nodesOf(place({ model: h100x2 }, inv(nodes)))).toEqual(['n02']);
    expect(nodesOf(place({ model: h100x2 }, inv([...nodes].reverse())))).toEqual(['n02']);
  });

  it('never places on a cordoned or unhealthy node even when it packs best', () => {
    const r = place(
      { model: h100x2 },
      inv([node('a', 2, 'H100', { cordoned: true }), node('b', 2, 'H100', { state: 'unreachable' }), node('c', 8)]),
    );
    expect(nodesOf(r)).toEqual(['c']);
  });
});

/** Places `count` replicas of the request in sequence, through place() and through an index; both must agree. */
function placeMany(req: PlacementRequest, start: Inventory, count: number): string[][] {
  let plain = start;
  let index = PlacementIndex.build(start);
  const out: string[][] = [];
  for (let i = 0; i < count; i++) {
    const r = place(req, plain);
    expect(index.place(req)).toEqual(r);
    out.push(nodesOf(r));
    plain = withAllocation(plain, `r${i}`, req, r);
    index = index.withAllocation(`r${i}`, req, r);
  }
  return out;
}

describe('place: GPU replicas of one model spread before they pack', () => {
  it('puts two replicas of a model on two different empty nodes', () => {
    const nodes = [node('a'), node('b'), node('c')];
    expect(placeMany({ model: h100x1 }, inv(nodes), 2)).toEqual([['a'], ['b']]);
    expect(placeMany({ model: h100x1 }, inv([...nodes].reverse()), 2)).toEqual([['a'], ['b']]);
  });

  it('fills every node once before any takes a second, then packs again', () => {
    expect(placeMany({ model: h100x1 }, inv([node('a'), node('b'), node('c')]), 5)).toEqual([['a'], ['b'], ['c'], ['a'], ['b']]);
  });

  it('still places on a node holding the model when no other fits (soft)', () => {
    const nodes = [node('a'), node('b', 8, 'A100'), node('c', 8, 'H100', { cordoned: true })];
    expect(placeMany({ model: h100x1 }, inv(nodes), 2)).toEqual([['a'], ['a']]);
  });

  it('prefers a node without the model over one that packs better', () => {
    const r = place({ model: h100x1 }, inv([node('a', 2), node('b', 8)], [alloc('a', [0], { model: 'm' })]));
    expect(nodesOf(r)).toEqual(['b']);
  });

  it('among nodes holding as many replicas of the model, packs, then weights, then id', () => {
    const held = [alloc('a', [0], { model: 'm' }), alloc('b', [0], { model: 'm' }), alloc('c', [0], { model: 'm' })];
    expect(nodesOf(place({ model: h100x1 }, inv([node('a', 8), node('b', 4), node('c', 4)], held)))).toEqual(['b']);
    const cached = inv([node('a', 4), withCache(node('c', 4), 100 * GB, [CACHE])], [held[0], held[2]]);
    expect(nodesOf(place({ model: h100x1, cacheName: CACHE }, cached))).toEqual(['c']);
  });

  it('still bin-packs across different models', () => {
    const other = model('x', [gpuProfile('H100', 1)]);
    const start = inv([node('a'), node('b'), node('c')]);
    const r = place({ model: other }, start);
    expect(nodesOf(r)).toEqual(['a']);
    // a now has 7 free: the fewest left after, and it holds no replica of m.
    expect(nodesOf(place({ model: h100x1 }, withAllocation(start, 'x1', other, r)))).toEqual(['a']);
  });

  it('counts replicas of the same model only, CPU ones included', () => {
    const held = [alloc('a', [0, 1], { model: 'other' }), alloc('b', [], { model: 'm' })];
    expect(nodesOf(place({ model: h100x1 }, inv([node('a'), node('b')], held)))).toEqual(['a']);
  });
});

describe('place: multi-node', () => {
  const twoBy8 = model('m', [gpuProfile('H100', 8, { nodes: 2 })]);

  it('uses m nodes of one fabric, rank 0 first, never across fabrics', () => {
    const nodes = [
      node('a1', 8, 'H100', { fabric: 'ib-a' }),
      node('b1', 8, 'H100', { fabric: 'ib-b' }),
      node('b2', 8, 'H100', { fabric: 'ib-b' }),
    ];
    const r = place({ model: twoBy8 }, inv(nodes));
    expect(r).toEqual({
      ok: true,
      profileIndex: 0,
      members: [
        { nodeId: 'b1', rank: 0, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] },
        { nodeId: 'b2', rank: 1, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] },
      ],
    });
  });

  it('picks the fabric with the fewest fitting nodes that suffices, then by name', () => {
    const f = (id: string, fabric: string) => node(id, 8, 'H100', { fabric });
    const nodes = [f('x1', 'big'), f('x2', 'big'), f('x3', 'big'), f('y1', 'tight'), f('y2', 'tight'), f('z1', 'also'), f('z2', 'also')];
    expect(nodesOf(place({ model: twoBy8 }, inv(nodes)))).toEqual(['z1', 'z2']);
    expect(nodesOf(place({ model: twoBy8 }, inv(nodes.slice(0, 5))))).toEqual(['y1', 'y2']);
  });

  it('orders members within the fabric by packing, then weights, then id', () => {
    const nodes = [
      node('a', 16, 'H100', { fabric: 'f' }),
      withCache(node('b', 8, 'H100', { fabric: 'f' }), 100 * GB, [CACHE]),
      node('c', 8, 'H100', { fabric: 'f' }),
    ];
    expect(nodesOf(place({ model: twoBy8, cacheName: CACHE }, inv(nodes)))).toEqual(['b', 'c']);
  });

  it('puts a second replica on other nodes of the fabric when it can, and shares them when not', () => {
    const fourByTwo = model('m', [gpuProfile('H100', 4, { nodes: 2 })]);
    const nodes = ['a', 'b', 'c', 'd'].map((id) => node(id, 8, 'H100', { fabric: 'f' }));
    expect(placeMany({ model: fourByTwo }, inv(nodes), 3)).toEqual([
      ['a', 'b'],
      ['c', 'd'],
      ['a', 'b'],
    ]);
    expect(placeMany({ model: fourByTwo }, inv(nodes.slice(0, 2)), 2)).toEqual([
      ['a', 'b'],
      ['a', 'b'],
    ]);
  });

  it('refuses nodes without a fabric even when they fit', () => {
    const r = place({ model: twoBy8 }, inv([node('a', 8, 'H100', { fabric: 'f' }), node('b', 8)]));
    expect(reasonsOf(r)).toEqual(['0/b: no fabric (multi-node)', '0: only 1 node with 8 free GPUs in fabric f, needs 2']);
  });
});

describe('place: CPU spreading tie-breaks', () => {
  const cpu = model('m', [cpuProfile({ memoryBytes: 1 * GB })]);

  it('prefers the node with the fewest replicas of this model', () => {
    const r = place({ model: cpu }, inv([node('a', 0), node('b', 0)], [alloc('a', [], { model: 'm' })]));
    expect(nodesOf(r)).toEqual(['b']);
  });

  it('then the fewest CPU replicas of any model (GPU replicas do not count)', () => {
    const r = place(
      { model: cpu },
      inv([node('a', 0), node('b', 8)], [alloc('a', [], { model: 'x' }), alloc('b', [0], { model: 'y' })]),
    );
    expect(nodesOf(r)).toEqual(['b']);
  });

  it('then the most free host memory', () => {
    const r = place({ model: cpu }, inv([node('a', 0), node('b', 0, 'x', { memoryBytes: 600 * GB })]));
    expect(nodesOf(r)).toEqual(['b']);
  });

  it('then the lowest node id, whatever the node order', () => {
    expect(nodesOf(place({ model: cpu }, inv([node('c', 0), node('b', 0)])))).toEqual(['b']);
  });

  it('may share a node with GPU replicas and takes no GPU', () => {
    const r = place({ model: cpu }, inv([node('a', 8)], [alloc('a', [0, 1, 2, 3, 4, 5, 6, 7])]));
    expect(r).toEqual({ ok: true, profileIndex: 0, members: [{ nodeId: 'a', rank: 0, gpuIndices: [] }] });
  });
});

describe('withAllocation', () => {
  it('records members, host memory and the planned weights; leaves the input alone', () => {
    const m = model('m', [gpuProfile('H100', 2, { memoryBytes: 4 * GB })]);
    const before = inv([node('a', 2), node('b', 2)]);
    const frozen = JSON.stringify(before);
    const r = place({ model: m, cacheName: CACHE }, before);
    const after = withAllocation(before, 'r1', { model: m, cacheName: CACHE }, r);
    expect(JSON.stringify(before)).toBe(frozen);
    expect(after.allocations).toEqual([{ replicaId: 'r1', model: 'm', nodeId: 'a', gpuIndices: [0, 1], memoryBytes: 4 * GB }]);
    const a = after.nodes.find((n) => n.id === 'a') as NodeInfo;
    expect(a.cache.freeBytes).toBe(84 * GB);
    expect(a.cache.entries.map((e) => e.name)).toEqual([CACHE]);
    expect(after.nodes.find((n) => n.id === 'b')).toBe(before.nodes[1]);
    // The next replica goes elsewhere: a's GPUs are taken.
    expect(nodesOf(place({ model: m, cacheName: CACHE }, after))).toEqual(['b']);
  });

  it('reserves no disk twice on a node that holds the weights, nor for a bare model', () => {
    const m = model('m', [cpuProfile()]);
    const start = inv([withCache(node('a', 0), 20 * GB, [CACHE])]);
    const once = withAllocation(start, 'r1', { model: m, cacheName: CACHE }, place({ model: m, cacheName: CACHE }, start));
    expect(once.nodes).toBe(start.nodes);
    const bare = withAllocation(start, 'r2', m, place({ model: m }, start));
    expect(bare.nodes).toBe(start.nodes);
    // A CPU replica that states no memory reserves its weights' size.
    expect(bare.allocations).toEqual([{ replicaId: 'r2', model: 'm', nodeId: 'a', gpuIndices: [], memoryBytes: m.sizeBytes }]);
  });

  it('changes nothing for an unplaceable result', () => {
    const start = inv([node('a', 0)]);
    expect(withAllocation(start, 'r', h100x2, place({ model: h100x2 }, start))).toBe(start);
  });
});
