import { Catalog } from '@llmgw/catalog';
import { describe, expect, it } from 'vitest';
import type { NodeEntry, ReplicaEntry } from '@llmgw/control';
import { statusView } from './admin.views';

const catalog = Catalog.create({
  models: [{ name: 'llama', source: 'hf://o/llama@main', size: 1, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100' }] }],
});

function node(id: string, entries: string[], connected = true): NodeEntry {
  return {
    info: {
      id,
      address: 'a',
      labels: {},
      gpus: [
        { index: 0, uuid: 'u0', name: 'H100', gpuClass: 'H100', memoryTotalBytes: 1, healthy: true },
        { index: 1, uuid: 'u1', name: 'H100', gpuClass: 'H100', memoryTotalBytes: 1, healthy: false },
      ],
      cpuCores: 1,
      memoryBytes: 1,
      cache: { dir: '/c', totalBytes: 0, freeBytes: 0, entries: entries.map((name, i) => ({ name, sizeBytes: 100 * (i + 1), modifiedAt: i })) },
      state: 'healthy',
      cordoned: false,
    },
    connected,
    draining: false,
    reported: new Map(),
  };
}

describe('statusView', () => {
  it('counts an unhealthy GPU as neither used nor free, and unknown idleness as unknown', () => {
    const replica: ReplicaEntry = {
      replica: { id: 'r1', model: 'llama', profileIndex: 0, engine: 'vllm', members: [{ nodeId: 'n1', rank: 0, gpuIndices: [0] }], state: 'ready', restarts: 0, createdAt: 0, updatedAt: 0 },
      memberStates: {},
      persisted: true,
      dirty: false,
      fetching: [],
    };
    const s = statusView(
      { now: 0, nodes: new Map([['n1', node('n1', [])]]), replicas: new Map([['r1', replica]]), catalog, unplaceable: new Map() },
      { id: 'c', leader: true, phase: 'active' },
    );
    expect(s.capacity).toEqual([{ gpuClass: 'H100', total: 2, used: 1, free: 0, unhealthy: 1, unavailable: 0 }]);
    expect(s.idle).toEqual({ replicas: [], unknown: 1 });
    expect(s.models).toEqual({ total: 1, satisfied: 1, unplaceable: 0 });
  });
});
