import { Catalog } from '@llmgw/catalog';
import * as pb from '@llmgw/proto';
import { describe, expect, it } from 'vitest';
import { engineUrl } from '@llmgw/domain';
import { collectReplyFromProto, fetchWeightsToProto, heartbeatFromProto, registrationFromProto, startReplicaToProto, WireError } from './proto.mapper';

function register(over: Partial<pb.Register> = {}): pb.Register {
  return {
    nodeId: 'node-1',
    address: '10.0.0.1',
    labels: { zone: 'a' },
    gpus: [
      { index: 0, uuid: 'u0', name: 'NVIDIA H100 80GB HBM3', gpuClass: 'H100-80GB', memoryTotalBytes: 80, healthy: true },
      { index: 1, uuid: 'u1', name: 'NVIDIA H100 80GB HBM3', gpuClass: 'H100-80GB', memoryTotalBytes: 80, utilizationPct: 0, eccErrors: 0, healthy: true },
    ],
    cpuCores: 8,
    memoryBytes: 64,
    cache: { dir: '/c', entries: [{ name: 'x', sizeBytes: 1, modifiedUnixMs: 2 }] },
    replicas: [],
    agentVersion: '',
    ...over,
  };
}

describe('proto edge', () => {
  it('keeps unset values unknown and zeros zero', () => {
    const r = registrationFromProto(register());
    expect(r.gpus[0]).not.toHaveProperty('utilizationPct');
    expect(r.gpus[0]).not.toHaveProperty('eccErrors');
    expect(r.gpus[1]).toMatchObject({ utilizationPct: 0, eccErrors: 0 });
    expect(r).not.toHaveProperty('cacheFreeBytes');
    expect(r.cacheEntries).toEqual([{ name: 'x', sizeBytes: 1, modifiedAt: 2 }]);
    const hb = heartbeatFromProto({ gpus: [{ index: 0, healthy: true }], replicas: [] });
    expect(hb).not.toHaveProperty('cacheEntries');
    expect(hb).not.toHaveProperty('cacheFreeBytes');
    expect(heartbeatFromProto({ gpus: [], replicas: [], cacheListing: { entries: [] } }).cacheEntries).toEqual([]);
  });

  it.each([
    ['an empty node id', register({ nodeId: '' }), 'register.nodeId'],
    ['a node id with a slash', register({ nodeId: 'a/b' }), 'register.nodeId'],
    ['no address', register({ address: '' }), 'register.address'],
    ['a GPU index twice', register({ gpus: [...register().gpus, register().gpus[0]] }), 'register.gpus'],
    [
      'a replica with an unknown engine',
      register({ replicas: [{ replicaId: 'r', model: 'm', engine: pb.EngineKind.ENGINE_KIND_UNSPECIFIED, state: pb.ReplicaState.REPLICA_STATE_READY, gpuIndices: [], rank: 0, restarts: 0 }] }),
      'register.replicas[0].engine',
    ],
  ])('refuses %s, naming the field', (_name, message, field) => {
    expect(() => registrationFromProto(message)).toThrow(WireError);
    try {
      registrationFromProto(message);
    } catch (e) {
      expect((e as WireError).field).toBe(field);
    }
  });

  it('builds StartReplica and FetchWeights from the catalog model and the placement', () => {
    const catalog = Catalog.create({
      models: [
        {
          name: 'big',
          aliases: ['b'],
          source: 'hf://o/big@main',
          size: 100,
          replicas: 1,
          profiles: [{ engine: 'vllm', gpuClass: 'H100', gpusPerNode: 2, nodes: 2, tensorParallel: 2, pipelineParallel: 2, args: ['--x'], env: { A: '1' } }],
        },
        { name: 'local', source: 'file:///models/x.gguf', size: 1, replicas: 1, profiles: [{ engine: 'llamacpp' }] },
      ],
    });
    const model = catalog.get('big');
    if (!model) throw new Error('no model');
    const members = [
      { nodeId: 'n1', rank: 0, gpuIndices: [0, 1], rendezvousPort: 41_234 },
      { nodeId: 'n2', rank: 1, gpuIndices: [2, 3] },
    ];
    const start = startReplicaToProto('c1', 'r1', model, 0, members[1], members, (id) => (id === 'n1' ? 'fe80::1' : '10.0.0.2'));
    expect(start).toMatchObject({
      commandId: 'c1',
      replicaId: 'r1',
      model: 'big',
      engine: pb.EngineKind.ENGINE_KIND_VLLM,
      servedName: 'big',
      aliases: ['b'],
      gpuIndices: [2, 3],
      rank: 1,
      leaderAddress: '[fe80::1]:41234',
      tensorParallel: 2,
      pipelineParallel: 2,
      engineArgs: ['--x'],
      env: { A: '1' },
    });
    expect(start.cacheName).toMatch(/^llmgw-[0-9a-f]{16}-big$/);
    expect(start.members.map((m) => [m.nodeId, m.address, m.rank])).toEqual([
      ['n1', 'fe80::1', 0],
      ['n2', '10.0.0.2', 1],
    ]);
    expect(start).not.toHaveProperty('port');
    expect(fetchWeightsToProto('c2', model)).toEqual({ commandId: 'c2', source: 'hf://o/big@main', cacheName: start.cacheName });
    expect(fetchWeightsToProto('c3', catalog.get('local') as NonNullable<ReturnType<Catalog['get']>>)).toBeUndefined();
    expect(engineUrl('10.0.0.1', 80)).toBe('http://10.0.0.1:80');
  });

  it('leaves the rendezvous port to rank 0 until it reports one, then names it to every member', () => {
    const catalog = Catalog.create({
      models: [{ name: 'big', source: 'hf://o/big@main', size: 100, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100', gpusPerNode: 2, nodes: 2, tensorParallel: 2, pipelineParallel: 2 }] }],
    });
    const model = catalog.get('big');
    if (!model) throw new Error('no model');
    const unknown = [
      { nodeId: 'n1', rank: 0, gpuIndices: [0, 1] },
      { nodeId: 'n2', rank: 1, gpuIndices: [0, 1] },
    ];
    const leader = startReplicaToProto('c1', 'r1', model, 0, unknown[0], unknown, (id) => id);
    expect(leader).not.toHaveProperty('leaderAddress');
    expect(leader.members.map((m) => [m.nodeId, m.rank])).toEqual([['n1', 0], ['n2', 1]]);
    const known = [{ ...unknown[0], rendezvousPort: 40_000 }, unknown[1]];
    for (const m of known) expect(startReplicaToProto('c2', 'r1', model, 0, m, known, (id) => (id === 'n1' ? '10.0.0.1' : id)).leaderAddress).toBe('10.0.0.1:40000');
  });

  it('a CollectWeights result becomes per-path outcomes by name; an unknown outcome is failed and an empty reason none', () => {
    const reply = collectReplyFromProto({
      commandId: 'c1',
      ok: false,
      message: 'partly',
      paths: [
        { path: 'a', outcome: pb.CollectOutcome.COLLECT_OUTCOME_REMOVED, reason: '' },
        { path: 'b', outcome: pb.CollectOutcome.COLLECT_OUTCOME_REFUSED, reason: 'in use' },
        { path: 'c', outcome: pb.CollectOutcome.COLLECT_OUTCOME_NOT_FOUND, reason: '' },
        { path: 'd', outcome: 99 as pb.CollectOutcome, reason: '' },
      ],
    });
    expect(reply).toEqual({
      ok: false,
      message: 'partly',
      paths: [
        { path: 'a', outcome: 'removed' },
        { path: 'b', outcome: 'refused', reason: 'in use' },
        { path: 'c', outcome: 'not_found' },
        { path: 'd', outcome: 'failed' },
      ],
    });
  });
});
