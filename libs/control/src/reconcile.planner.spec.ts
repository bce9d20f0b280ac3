import { Catalog } from '@llmgw/catalog';
import type { Gpu, Replica, ReplicaState } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import type { NodeEntry, ReportedReplica } from './node.entry';
import type { ReplicaEntry } from './replica.entry';
import { byEvictionOrder, planReconcile, type PlanAction, type PlanInput, type UnplaceableState } from './reconcile.planner';

const NOW = 1_000_000;
const GB = 1e9;
const TIMING = { backoffMinMs: 1_000, backoffMaxMs: 60_000, maxRestarts: 2, commandGraceMs: 5_000 };

function catalog(models: { name: string; replicas: number | { min: number; max: number }; gpus?: number; gpuClass?: string }[]): Catalog {
  return Catalog.create({
    models: models.map((m) => ({
      name: m.name,
      source: `hf://org/${m.name}@main`,
      size: '10GB',
      replicas: m.replicas,
      profiles: [{ engine: 'vllm', gpuClass: m.gpuClass ?? 'H100-80GB', gpusPerNode: m.gpus ?? 1 }],
    })),
  });
}

function gpus(n: number): Gpu[] {
  return Array.from({ length: n }, (_, i) => ({ index: i, uuid: `GPU-${i}`, name: 'NVIDIA H100 80GB HBM3', gpuClass: 'H100-80GB', memoryTotalBytes: 80 * GB, healthy: true }));
}

function node(id: string, opts: Partial<{ state: NodeEntry['info']['state']; connected: boolean; draining: boolean; reported: ReportedReplica[]; reportedAt: number; cordoned: boolean }> = {}): NodeEntry {
  const reported = opts.reported ?? [];
  return {
    info: {
      id,
      address: `10.0.0.${id.slice(-1)}`,
      labels: {},
      gpus: gpus(8),
      cpuCores: 64,
      memoryBytes: 512 * GB,
      cache: { dir: '/cache', totalBytes: 1000 * GB, freeBytes: 900 * GB, entries: [] },
      state: opts.state ?? 'healthy',
      cordoned: opts.cordoned ?? opts.draining ?? false,
    },
    cacheFreeBytes: 900 * GB,
    cacheTotalBytes: 1000 * GB,
    lastSeen: NOW,
    connected: opts.connected ?? true,
    draining: opts.draining ?? false,
    reported: new Map(reported.map((r) => [r.replicaId, r])),
    reportedAt: opts.reportedAt ?? NOW,
  };
}

function reported(replicaId: string, state: ReplicaState = 'ready', model = 'llama'): ReportedReplica {
  return { replicaId, model, engine: 'vllm', state, port: 8000, gpuIndices: [0], rank: 0, restarts: 0 };
}

function replica(id: string, nodeId: string, opts: Partial<Replica> & Partial<Pick<ReplicaEntry, 'commandSentAt' | 'stopSentAt' | 'failedAt' | 'fetching'>> = {}): ReplicaEntry {
  const { commandSentAt, stopSentAt, failedAt, fetching, ...r } = opts;
  const gpu = Number(id.replace(/\D/g, '')) % 8;
  return {
    replica: {
      id,
      model: 'llama',
      profileIndex: 0,
      engine: 'vllm',
      members: [{ nodeId, rank: 0, gpuIndices: [gpu], port: 8000 }],
      state: 'ready',
      restarts: 0,
      createdAt: NOW - 100_000,
      updatedAt: NOW - 100_000,
      ...r,
    },
    memberStates: {},
    persisted: true,
    dirty: false,
    fetching: fetching ?? [],
    ...(commandSentAt !== undefined ? { commandSentAt } : {}),
    ...(stopSentAt !== undefined ? { stopSentAt } : {}),
    ...(failedAt !== undefined ? { failedAt } : {}),
  };
}

function input(parts: Partial<Omit<PlanInput, 'nodes' | 'replicas'>> & { nodes: NodeEntry[]; replicas?: ReplicaEntry[] }): PlanInput {
  let n = 0;
  return {
    now: NOW,
    catalog: catalog([{ name: 'llama', replicas: 2 }]),
    unplaceable: new Map(),
    avoid: new Map(),
    unknownStops: new Map(),
    capacityEpoch: 1,
    timing: TIMING,
    newReplicaId: (model) => `${model}-new${++n}`,
    ...parts,
    nodes: new Map(parts.nodes.map((x) => [x.info.id, x])),
    replicas: new Map((parts.replicas ?? []).map((x) => [x.replica.id, x])),
  };
}

const kinds = (actions: PlanAction[]) => actions.map((a) => a.kind);
const of = <K extends PlanAction['kind']>(actions: PlanAction[], kind: K) => actions.filter((a): a is Extract<PlanAction, { kind: K }> => a.kind === kind);

describe('planReconcile', () => {
  it('places the missing replicas, fetching weights once per node, and is deterministic', () => {
    const snapshot = input({ nodes: [node('node-1'), node('node-2'), node('node-3')] });
    const plan = planReconcile(snapshot);
    const places = of(plan, 'place');
    expect(places).toHaveLength(2);
    for (const p of places) expect(p.members[0].gpuIndices).toHaveLength(1);
    // Replicas of one model spread before they pack: two nodes, each fetching the weights once.
    const nodesUsed = places.map((p) => p.members[0].nodeId);
    expect(new Set(nodesUsed).size).toBe(2);
    expect(places.flatMap((p) => p.fetchOn).sort()).toEqual([...nodesUsed].sort());
    expect(planReconcile(input({ nodes: [node('node-3'), node('node-1'), node('node-2')] }))).toEqual(plan);
  });

  it('does nothing when what runs is what the catalog wants (level-triggered: same state, same empty plan)', () => {
    const nodes = [node('node-1', { reported: [reported('r1'), reported('r2')] }), node('node-2')];
    const replicas = [replica('r1', 'node-1'), replica('r2', 'node-1')];
    expect(planReconcile(input({ nodes, replicas }))).toEqual([]);
    expect(planReconcile(input({ nodes, replicas }))).toEqual([]);
  });

  it('tears down replicas whose model left the catalog', () => {
    const plan = planReconcile(
      input({ catalog: catalog([{ name: 'other', replicas: 0 }]), nodes: [node('node-1', { reported: [reported('r1')] })], replicas: [replica('r1', 'node-1')] }),
    );
    expect(plan).toEqual([{ kind: 'stop', replicaId: 'r1', reason: 'model is no longer in the catalog', event: 'evicted' }]);
  });

  it('keeps replicas on an unreachable node and places nothing new for them', () => {
    const plan = planReconcile(
      input({
        nodes: [node('node-1', { state: 'unreachable', connected: false }), node('node-2', { reported: [reported('r2')] })],
        replicas: [replica('r1', 'node-1'), replica('r2', 'node-2')],
      }),
    );
    expect(plan).toEqual([]);
  });

  it('forgets replicas of a lost node and rebuilds them on a survivor', () => {
    const plan = planReconcile(
      input({
        nodes: [node('node-1', { state: 'lost', connected: false }), node('node-2', { reported: [reported('r2')] })],
        replicas: [replica('r1', 'node-1'), replica('r2', 'node-2')],
      }),
    );
    expect(kinds(plan)).toEqual(['forget', 'place']);
    expect(plan[0]).toEqual({ kind: 'forget', replicaId: 'r1', event: 'lost', reason: 'node node-1 lost' });
    expect(of(plan, 'place')[0].members[0].nodeId).toBe('node-2');
  });

  it('stops surplus replicas: not-ready first, then the longest idle; unknown idleness is never the most idle', () => {
    const nodes = [node('node-1', { reported: ['r1', 'r2', 'r3', 'r4'].map((id) => reported(id)) })];
    const replicas = [
      replica('r1', 'node-1'), // unknown
      replica('r2', 'node-1', { lastUsedAt: NOW - 50_000 }),
      replica('r3', 'node-1', { lastUsedAt: NOW - 10 }),
      replica('r4', 'node-1', { lastUsedAt: NOW - 90_000 }),
    ];
    const stops = (max: number) =>
      of(planReconcile(input({ catalog: catalog([{ name: 'llama', replicas: { min: 1, max } }]), nodes, replicas })), 'stop').map((a) => a.replicaId);
    expect(stops(3)).toEqual(['r4']);
    expect(stops(2)).toEqual(['r4', 'r2']);
    expect(stops(1)).toEqual(['r4', 'r2', 'r3']);
  });

  it.each<[string, ReplicaEntry, string, string | undefined]>([
    ['a failed replica still in backoff waits', replica('r1', 'node-1', { state: 'failed', failedAt: NOW - 500 }), '', undefined],
    ['after backoff it restarts in place', replica('r1', 'node-1', { state: 'failed', failedAt: NOW - 1_000 }), 'restart', undefined],
    ['backoff doubles with restarts', replica('r1', 'node-1', { state: 'failed', restarts: 1, failedAt: NOW - 1_999 }), '', undefined],
    ['after max restarts it moves, and a replacement avoids the node', replica('r1', 'node-1', { state: 'failed', restarts: 2, failedAt: NOW - 4_000 }), 'move,place', 'node-2'],
  ])('%s', (_name, failed, expected, placedOn) => {
    const nodes = [node('node-1', { reported: [reported('r1', 'failed'), reported('r0')] }), node('node-2')];
    const plan = planReconcile(input({ catalog: catalog([{ name: 'llama', replicas: 2 }]), nodes, replicas: [failed, replica('r0', 'node-1')] }));
    expect(kinds(plan).join(',')).toBe(expected);
    if (placedOn) expect(of(plan, 'place')[0].members[0].nodeId).toBe(placedOn);
  });

  it('reports a model that fits nowhere with reasons and does not retry it before its backoff', () => {
    const nodes = [node('node-1'), node('node-2')];
    const big = catalog([{ name: 'huge', replicas: 1, gpuClass: 'B200-192GB' }]);
    const first = planReconcile(input({ catalog: big, nodes }));
    expect(kinds(first)).toEqual(['unplaceable']);
    const state = of(first, 'unplaceable')[0].state;
    expect(state).toMatchObject({ attempts: 1, since: NOW, retryAt: NOW + 1_000, epoch: 1 });
    expect(state.reasons.length).toBeGreaterThan(0);
    expect(state.summary).not.toBe('');

    const known = new Map<string, UnplaceableState>([['huge', state]]);
    expect(planReconcile(input({ catalog: big, nodes, unplaceable: known, now: NOW + 999 }))).toEqual([]);
    // A capacity change (a node joined) is worth one try at once…
    expect(kinds(planReconcile(input({ catalog: big, nodes, unplaceable: known, now: NOW + 1, capacityEpoch: 2 })))).toEqual(['unplaceable']);
    // …and after the backoff the next failure waits twice as long.
    const again = of(planReconcile(input({ catalog: big, nodes, unplaceable: known, now: NOW + 1_000 })), 'unplaceable')[0].state;
    expect(again).toMatchObject({ attempts: 2, since: NOW, retryAt: NOW + 1_000 + 2_000 });
  });

  it('places none of a model that wants more replicas than the whole fleet could ever hold, and says why', () => {
    // 2 nodes × 8 GPUs, one lost: even healthy and empty they hold 16 one-GPU replicas, not 1000.
    const nodes = [node('node-1'), node('node-2', { state: 'lost', connected: false })];
    const flood = catalog([{ name: 'llama', replicas: 1000 }]);
    const plan = planReconcile(input({ catalog: flood, nodes }));
    expect(kinds(plan)).toEqual(['unplaceable']);
    const state = of(plan, 'unplaceable')[0].state;
    expect(state.summary.split('\n')[0]).toBe(
      'model llama: wants 1000 replicas, but the fleet (2 nodes) could hold at most 16 even with every node healthy and running nothing else; none placed',
    );
    expect(state.summary).toContain('needs 1 free GPU, has 0: node-1');
    expect(state).toMatchObject({ attempts: 1, retryAt: NOW + 1_000 });
    // Not tried again before its backoff.
    expect(planReconcile(input({ catalog: flood, nodes, unplaceable: new Map([['llama', state]]), now: NOW + 999 }))).toEqual([]);
  });

  it('still places what fits when the fleet could hold every wanted replica once other replicas leave', () => {
    // 16 wanted; node-1 holds 8 of another model's replicas, so 8 fit now and the rest wait.
    const busy = Array.from({ length: 8 }, (_, i) => replica(`o${i}`, 'node-1', { model: 'other', members: [{ nodeId: 'node-1', rank: 0, gpuIndices: [i], port: 8000 + i }] }));
    const nodes = [node('node-1', { reported: busy.map((r) => reported(r.replica.id, 'ready', 'other')) }), node('node-2')];
    const plan = planReconcile(input({ catalog: catalog([{ name: 'llama', replicas: 16 }, { name: 'other', replicas: 8 }]), nodes, replicas: busy }));
    expect(of(plan, 'place')).toHaveLength(8);
    expect(of(plan, 'unplaceable')[0].state.summary.split('\n')[0]).toBe('model llama: no profile fits');
  });

  it('never floods one node with CPU replicas: each takes a core and its weights in memory', () => {
    const cpu = Catalog.create({
      models: [{ name: 'tiny', source: 'hf://org/tiny/tiny.gguf@main', size: '1GB', replicas: 93, profiles: [{ engine: 'llamacpp' }] }],
    });
    const small = { ...node('node-1'), info: { ...node('node-1').info, gpus: [], cpuCores: 16, memoryBytes: 8 * GB } };
    const plan = planReconcile(input({ catalog: cpu, nodes: [small] }));
    expect(kinds(plan)).toEqual(['unplaceable']);
    expect(of(plan, 'unplaceable')[0].state.summary.split('\n')[0]).toBe(
      'model tiny: wants 93 replicas, but the fleet (1 node) could hold at most 8 even with every node healthy and running nothing else; none placed',
    );
    // Within what the node holds, CPU replicas are placed up to its memory and cores.
    const eight = Catalog.create({ models: [{ ...cpu.toSpec().models[0], replicas: 8 }] });
    expect(of(planReconcile(input({ catalog: eight, nodes: [small] })), 'place')).toHaveLength(8);
    const cores = { ...small, info: { ...small.info, cpuCores: 3 } };
    const three = planReconcile(input({ catalog: Catalog.create({ models: [{ ...cpu.toSpec().models[0], replicas: 3 }] }), nodes: [cores] }));
    expect(of(three, 'place')).toHaveLength(3);
    expect(kinds(planReconcile(input({ catalog: eight, nodes: [cores] })))).toEqual(['unplaceable']);
  });

  it('clears unplaceable once the model is placed or gone', () => {
    const known = new Map<string, UnplaceableState>([['llama', { reasons: [], summary: 'x', attempts: 3, since: 0, retryAt: 0, epoch: 0 }]]);
    expect(kinds(planReconcile(input({ nodes: [node('node-1')], unplaceable: known })))).toEqual(['place', 'place', 'placeable']);
    expect(planReconcile(input({ catalog: catalog([]), nodes: [node('node-1')], unplaceable: known }))).toEqual([{ kind: 'placeable', model: 'llama' }]);
  });

  it('stops replicas an agent runs that nobody placed, once per grace period', () => {
    const nodes = [node('node-1', { reported: [reported('ghost', 'ready', 'llama'), reported('old', 'stopped')] })];
    const replicas = [replica('r1', 'node-2'), replica('r2', 'node-2')];
    const all = [...nodes, node('node-2', { reported: [reported('r1'), reported('r2')] })];
    expect(planReconcile(input({ nodes: all, replicas }))).toEqual([{ kind: 'stop-unknown', nodeId: 'node-1', replicaId: 'ghost', model: 'llama' }]);
    expect(planReconcile(input({ nodes: all, replicas, unknownStops: new Map([['node-1/ghost', NOW - 100]]) }))).toEqual([]);
  });

  it('sends a start again when the agent reports without the replica after the grace period', () => {
    const placed = (sentAt: number, fetching: string[] = []) => [replica('r1', 'node-1', { state: 'pending', commandSentAt: sentAt, fetching }), replica('r2', 'node-1', { commandSentAt: sentAt })];
    const nodes = [node('node-1', { reported: [reported('r2')], reportedAt: NOW })];
    expect(planReconcile(input({ nodes, replicas: placed(NOW - 1_000) }))).toEqual([]);
    expect(planReconcile(input({ nodes, replicas: placed(NOW - 6_000) }))).toEqual([{ kind: 'resend-start', replicaId: 'r1', nodeIds: ['node-1'] }]);
    expect(planReconcile(input({ nodes, replicas: placed(NOW - 6_000, ['node-1']) }))).toEqual([]);
  });

  it('does not count a multi-node member waiting for the rendezvous port as forgotten, only once rank 0 announced it', () => {
    const nodes = [node('node-1', { reported: [reported('r1', 'starting')], reportedAt: NOW }), node('node-2', { reportedAt: NOW })];
    const twoNode = (rendezvousPort?: number) => [
      replica('r1', 'node-1', {
        state: 'starting',
        commandSentAt: NOW - 6_000,
        members: [
          { nodeId: 'node-1', rank: 0, gpuIndices: [0], ...(rendezvousPort !== undefined ? { rendezvousPort } : {}) },
          { nodeId: 'node-2', rank: 1, gpuIndices: [0] },
        ],
      }),
    ];
    expect(planReconcile(input({ nodes, replicas: twoNode() })).filter((a) => a.kind === 'resend-start')).toEqual([]);
    expect(planReconcile(input({ nodes, replicas: twoNode(41_000) })).filter((a) => a.kind === 'resend-start')).toEqual([
      { kind: 'resend-start', replicaId: 'r1', nodeIds: ['node-2'] },
    ]);
  });

  it('forgets a stopping replica once its agent confirms, and resends the stop when it does not', () => {
    const stopping = replica('r1', 'node-1', { state: 'draining', stopSentAt: NOW - 6_000 });
    const keep = [replica('r2', 'node-1'), replica('r3', 'node-1')];
    const listing = (ids: string[], at: number) => [node('node-1', { reported: ids.map((id) => reported(id)), reportedAt: at })];
    expect(kinds(planReconcile(input({ nodes: listing(['r2', 'r3'], NOW), replicas: [stopping, ...keep] })))).toEqual(['forget']);
    expect(planReconcile(input({ nodes: listing(['r1', 'r2', 'r3'], NOW), replicas: [stopping, ...keep] }))).toEqual([
      { kind: 'resend-stop', replicaId: 'r1', nodeIds: ['node-1'] },
    ]);
    // A report from before the stop proves nothing.
    expect(planReconcile(input({ nodes: listing(['r2', 'r3'], NOW - 7_000), replicas: [stopping, ...keep] }))).toEqual([
      { kind: 'resend-stop', replicaId: 'r1', nodeIds: ['node-1'] },
    ]);
  });

  it('drains a node make-before-break: replacement first, the drained replica stops once it is ready', () => {
    const nodes = (ready: boolean) => [
      node('node-1', { draining: true, reported: [reported('r1'), reported('r2')] }),
      node('node-2', { reported: ready ? [reported('n1'), reported('n2')] : [] }),
    ];
    const before = planReconcile(input({ nodes: nodes(false), replicas: [replica('r1', 'node-1'), replica('r2', 'node-1')] }));
    expect(kinds(before)).toEqual(['place', 'place']);
    expect(of(before, 'place').every((p) => p.members[0].nodeId === 'node-2')).toBe(true);
    const after = planReconcile(
      input({ nodes: nodes(true), replicas: [replica('r1', 'node-1'), replica('r2', 'node-1'), replica('n1', 'node-2'), replica('n2', 'node-2')] }),
    );
    expect(of(after, 'stop').map((s) => [s.replicaId, s.reason])).toEqual([
      ['r1', 'node drained'],
      ['r2', 'node drained'],
    ]);
  });

  it('never places on a node whose agent is not connected', () => {
    const plan = planReconcile(input({ nodes: [node('node-1', { connected: false }), node('node-2')] }));
    expect(of(plan, 'place').map((p) => p.members[0].nodeId)).toEqual(['node-2', 'node-2']);
  });
});

describe('byEvictionOrder', () => {
  it.each<[string, Partial<Replica>, Partial<Replica>, -1 | 1]>([
    ['failed before ready', { state: 'failed' }, { state: 'ready', lastUsedAt: 1 }, -1],
    ['starting before ready', { state: 'starting' }, { state: 'ready' }, -1],
    ['older use first', { lastUsedAt: 10 }, { lastUsedAt: 20 }, -1],
    ['known before unknown', { lastUsedAt: NOW }, {}, -1],
    ['unknown after known', {}, { lastUsedAt: 0 }, 1],
  ])('%s', (_name, a, b, sign) => {
    const cmp = byEvictionOrder(replica('a1', 'n', a), replica('b1', 'n', b));
    expect(Math.sign(cmp)).toBe(sign);
  });
});

