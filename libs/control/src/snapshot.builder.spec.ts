import { Catalog } from '@llmgw/catalog';
import type { NodeState, ReplicaMember, ReplicaState } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import type { NodeEntry } from './node.entry';
import type { ReplicaEntry } from './replica.entry';
import { buildCatalogView, buildEndpoints, type EndpointMemo } from './snapshot.builder';

const catalog = Catalog.create({
  models: [
    { name: 'llama', aliases: ['l'], source: 'hf://o/llama@main', size: 1, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100' }] },
    {
      name: 'tiny',
      source: 'hf://o/tiny/tiny.gguf@main',
      size: 1,
      replicas: 1,
      metrics: { running: 'my_running' },
      firstByteTimeout: '20s',
      stallTimeout: '5s',
      profiles: [{ engine: 'llamacpp', args: ['--embeddings'] }],
    },
  ],
});

/** Nodes by id; each `[id, state?, address?]` (address defaults to 10.0.0.<last digit of id>). */
function nodesOf(...specs: [string, NodeState?, string?][]): Map<string, NodeEntry> {
  const cache = { dir: '/', totalBytes: 0, freeBytes: 0, entries: [] };
  return new Map(
    specs.map(([id, state = 'healthy', address = `10.0.0.${id.slice(-1)}`]) => [
      id,
      { info: { id, address, labels: {}, gpus: [], cpuCores: 1, memoryBytes: 1, cache, state, cordoned: false }, connected: true, draining: false, reported: new Map() },
    ]),
  );
}

/** A replica entry of `model` (llama) in `state` (ready) whose rank-0 member is on `nodeId`, serving on `port` (none: null). */
function entry(id: string, nodeId: string, state: ReplicaState = 'ready', port: number | null = 8000, model = 'llama', more: ReplicaMember[] = []): ReplicaEntry {
  const members = [{ nodeId, rank: 0, gpuIndices: [0], ...(port !== null ? { port } : {}) }, ...more];
  return { replica: { id, model, profileIndex: 0, engine: 'vllm', members, state, restarts: 0, createdAt: 0, updatedAt: 0 }, memberStates: {}, persisted: true, dirty: false, fetching: [] };
}

describe('buildEndpoints', () => {
  it('lists ready replicas with a port on known, non-lost nodes of models in the catalog; unreachable = suspect', () => {
    const nodes = nodesOf(['n1'], ['n2', 'unreachable'], ['n3', 'lost'], ['n4', 'healthy', 'fe80::1']);
    const endpoints = buildEndpoints(
      nodes,
      [
        entry('r5', 'n1', 'starting'),
        entry('r1', 'n1'),
        entry('r2', 'n2'),
        entry('r3', 'n3'),
        entry('r4', 'n1', 'ready', null),
        entry('r6', 'nowhere'),
        entry('r7', 'n1', 'ready', 8001, 'removed-model'),
        entry('r8', 'n4', 'ready', 9000),
      ],
      catalog,
    );
    expect(endpoints).toEqual([
      { replicaId: 'r1', model: 'llama', url: 'http://10.0.0.1:8000', engine: 'vllm', nodeId: 'n1', suspect: false },
      { replicaId: 'r2', model: 'llama', url: 'http://10.0.0.2:8000', engine: 'vllm', nodeId: 'n2', suspect: true },
      { replicaId: 'r8', model: 'llama', url: 'http://[fe80::1]:9000', engine: 'vllm', nodeId: 'n4', suspect: false },
    ]);
  });

  it('judges a multi-node replica by every member: any lost drops it, any unreachable makes it suspect; the URL is rank 0\'s', () => {
    const nodes = nodesOf(['n1'], ['n2', 'unreachable'], ['n3', 'lost']);
    const endpoints = buildEndpoints(
      nodes,
      [entry('a', 'n1', 'ready', 8000, 'llama', [{ nodeId: 'n2', rank: 1, gpuIndices: [0] }]), entry('b', 'n1', 'ready', 8000, 'llama', [{ nodeId: 'n3', rank: 1, gpuIndices: [0] }])],
      catalog,
    );
    expect(endpoints).toEqual([{ replicaId: 'a', model: 'llama', url: 'http://10.0.0.1:8000', engine: 'vllm', nodeId: 'n1', suspect: true }]);
  });

  it('skips the model check without a catalog (none loaded yet) rather than withdrawing everything', () => {
    expect(buildEndpoints(nodesOf(['n1']), [entry('r1', 'n1', 'ready', 8000, 'anything')], undefined).map((e) => e.replicaId)).toEqual(['r1']);
  });

  it('hands back the very same endpoint for an unchanged entry on unchanged nodes, and a new one when a node changes', () => {
    const memo: EndpointMemo = new WeakMap();
    const r1 = entry('r1', 'n1');
    const [first] = buildEndpoints(nodesOf(['n1']), [r1], catalog, memo);
    expect(buildEndpoints(nodesOf(['n1']), [r1], catalog, memo)[0]).toBe(first);
    const suspect = buildEndpoints(nodesOf(['n1', 'unreachable']), [r1], catalog, memo)[0];
    expect(suspect).not.toBe(first);
    expect(suspect.suspect).toBe(true);
    const moved = buildEndpoints(nodesOf(['n1', 'healthy', '10.9.9.9']), [r1], catalog, memo)[0];
    expect(moved.url).toBe('http://10.9.9.9:8000');
    expect(Object.isFrozen(moved)).toBe(true);
  });
});

describe('buildCatalogView', () => {
  it('carries names, aliases, the preferred engine, a model\'s own metric mapping and deadlines only, and the endpoints it serves', () => {
    expect(buildCatalogView(catalog, 7)).toEqual({
      revision: 7,
      models: [
        { name: 'llama', aliases: ['l'], engine: 'vllm', endpoints: ['chat', 'completions'] },
        { name: 'tiny', aliases: [], engine: 'llamacpp', metrics: { running: 'my_running' }, endpoints: ['embeddings'], firstByteTimeoutMs: 20_000, stallTimeoutMs: 5_000 },
      ],
    });
  });

  it('is empty, at the revision given, without a catalog', () => {
    expect(buildCatalogView(undefined, 0)).toEqual({ revision: 0, models: [] });
  });
});
