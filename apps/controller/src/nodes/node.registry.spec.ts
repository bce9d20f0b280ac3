import type { Gpu } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import type { NodeRegistration } from '@llmgw/control';
import { NodeRegistry, type NodeChange } from './node.registry';

const windows = { unreachableAfterMs: 1_000, lostAfterMs: 5_000 };

function registration(id: string, gpus: Partial<Gpu>[] = [{}]): NodeRegistration {
  return {
    id,
    address: '10.0.0.1',
    labels: {},
    gpus: gpus.map((g, index) => ({ index, uuid: `g${index}`, name: 'H100', gpuClass: 'H100', memoryTotalBytes: 80, healthy: true, ...g })),
    cpuCores: 8,
    memoryBytes: 64,
    cacheDir: '/c',
    cacheEntries: [],
    replicas: [],
    agentVersion: '',
  };
}

describe('NodeRegistry', () => {
  it('moves a silent node to unreachable then lost, and a heartbeat brings it back healthy', () => {
    const nodes = new NodeRegistry();
    const changes: NodeChange[] = [];
    nodes.onChange((c) => changes.push(c));
    nodes.register(registration('n1'), 0);
    expect(nodes.checkHealth(1_000, windows)).toEqual([]);
    expect(nodes.checkHealth(1_001, windows)).toEqual([{ nodeId: 'n1', from: 'healthy', to: 'unreachable' }]);
    expect(nodes.checkHealth(5_001, windows)).toEqual([{ nodeId: 'n1', from: 'unreachable', to: 'lost' }]);
    nodes.heartbeat('n1', { gpus: [], replicas: [] }, 6_000);
    expect(nodes.get('n1')?.info.state).toBe('healthy');
    expect(changes.filter((c) => c.kind === 'state').map((c) => (c.kind === 'state' ? c.to : ''))).toEqual(['unreachable', 'lost', 'healthy']);
  });

  it('measures health from when leadership began, so stored nodes get the full window to reconnect', () => {
    const nodes = new NodeRegistry();
    nodes.loadFromStore([{ ...nodeRecord('n1'), lastSeen: 0 }], 100_000);
    expect(nodes.get('n1')?.connected).toBe(false);
    expect(nodes.checkHealth(100_500, windows)).toEqual([]);
    expect(nodes.checkHealth(101_001, windows)).toEqual([{ nodeId: 'n1', from: 'healthy', to: 'unreachable' }]);
  });

  it('keeps unknown GPU values unknown: a heartbeat without utilisation leaves none', () => {
    const nodes = new NodeRegistry();
    nodes.register(registration('n1', [{ utilizationPct: 50 }]), 0);
    nodes.heartbeat('n1', { gpus: [{ index: 0, healthy: false, memoryUsedBytes: 10 }], replicas: [] }, 1);
    const gpu = nodes.get('n1')?.info.gpus[0];
    expect(gpu).toMatchObject({ healthy: false, memoryUsedBytes: 10 });
    expect(gpu).not.toHaveProperty('utilizationPct');
  });

  it('shares with the previous entry what a heartbeat leaves as it was, and replaces what it changes', () => {
    const nodes = new NodeRegistry();
    nodes.register(registration('n1', [{}, {}]), 0);
    const replica = { replicaId: 'r1', model: 'm', engine: 'vllm' as const, state: 'ready' as const, port: 8000, gpuIndices: [0], rank: 0, restarts: 0 };
    const live = [
      { index: 0, healthy: true, utilizationPct: 5, memoryUsedBytes: 1 },
      { index: 1, healthy: true, utilizationPct: 0, memoryUsedBytes: 1 },
    ];
    const first = nodes.heartbeat('n1', { gpus: live, cacheFreeBytes: 7, replicas: [replica] }, 1);
    const same = nodes.heartbeat('n1', { gpus: live.map((g) => ({ ...g })), cacheFreeBytes: 7, replicas: [{ ...replica, gpuIndices: [0] }] }, 2);
    expect(same?.lastSeen).toBe(2);
    expect(same?.info).toBe(first?.info);
    expect(same?.reported).toBe(first?.reported);
    const busier = nodes.heartbeat('n1', { gpus: [{ ...live[0], utilizationPct: 90 }, live[1]], cacheFreeBytes: 7, replicas: [{ ...replica, restarts: 1 }] }, 3);
    expect(busier?.info.gpus[0]).toMatchObject({ utilizationPct: 90, memoryUsedBytes: 1 });
    expect(first?.info.gpus[0]).toMatchObject({ utilizationPct: 5 });
    expect(busier?.info.gpus[1]).toBe(first?.info.gpus[1]);
    expect(busier?.reported.get('r1')?.restarts).toBe(1);
    const unknown = nodes.heartbeat('n1', { gpus: [{ index: 0, healthy: true, memoryUsedBytes: 1 }, live[1]], cacheFreeBytes: 6, replicas: [] }, 4);
    expect(unknown?.info.gpus[0]).not.toHaveProperty('utilizationPct');
    expect(unknown?.info.cache.freeBytes).toBe(6);
    expect(unknown?.reported.size).toBe(0);
  });

  it('keeps an operator cordon across re-registration; uncordon ends a drain', () => {
    const nodes = new NodeRegistry();
    nodes.register(registration('n1'), 0);
    nodes.setCordoned('n1', true, true);
    nodes.register(registration('n1'), 10);
    expect(nodes.get('n1')).toMatchObject({ info: { cordoned: true }, draining: true });
    nodes.setCordoned('n1', false);
    expect(nodes.get('n1')).toMatchObject({ info: { cordoned: false }, draining: false });
    expect(nodes.setCordoned('nope', true)).toBe(false);
  });

  it('takes cordon and drain from the store, also over what it held before (a standby re-reading)', () => {
    const nodes = new NodeRegistry();
    nodes.loadFromStore([{ ...nodeRecord('n1'), cordoned: true, draining: true }, nodeRecord('n2')], 0);
    expect(nodes.get('n1')).toMatchObject({ info: { cordoned: true }, draining: true });
    expect(nodes.get('n1')?.info).not.toHaveProperty('draining');
    expect(nodes.get('n2')).toMatchObject({ info: { cordoned: false }, draining: false });
    nodes.register(registration('n1'), 10);
    expect(nodes.get('n1')).toMatchObject({ info: { cordoned: true }, draining: true });
    nodes.loadFromStore([nodeRecord('n1'), { ...nodeRecord('n2'), cordoned: true, draining: true }], 0);
    expect(nodes.get('n1')).toMatchObject({ info: { cordoned: false }, draining: false });
    expect(nodes.get('n2')?.draining).toBe(true);
  });

  it('remembers changed nodes for the store until taken, and takes failed writes back', () => {
    const nodes = new NodeRegistry();
    nodes.register(registration('n1'), 0);
    nodes.register(registration('n2'), 0);
    expect(nodes.takeDirty().sort()).toEqual(['n1', 'n2']);
    expect(nodes.takeDirty()).toEqual([]);
    nodes.markDirty(['n2', 'gone']);
    expect(nodes.takeDirty()).toEqual(['n2']);
  });

  it('snapshots never change after the fact', () => {
    const nodes = new NodeRegistry();
    nodes.register(registration('n1'), 0);
    const before = nodes.snapshot();
    nodes.heartbeat('n1', { gpus: [], replicas: [], cacheFreeBytes: 5 }, 1);
    expect(before.get('n1')?.cacheFreeBytes).toBeUndefined();
    expect(nodes.get('n1')?.cacheFreeBytes).toBe(5);
  });
});

function nodeRecord(id: string) {
  return {
    id,
    address: 'a',
    labels: {},
    gpus: [],
    cpuCores: 1,
    memoryBytes: 1,
    cache: { dir: '/c', totalBytes: 0, freeBytes: 0, entries: [] },
    state: 'healthy' as const,
    cordoned: false,
    draining: false,
  };
}
