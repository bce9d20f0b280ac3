import { ErrorCode } from '@llmgw/domain';
import { testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './store.factory';
import type { NodeRecord } from './store.ports';

const node: NodeRecord = {
  id: 'gpu-01',
  address: '10.0.0.11',
  labels: { rack: 'r1' },
  fabric: 'ib-a',
  gpus: [
    { index: 0, uuid: 'GPU-aaaa', name: 'NVIDIA H100 80GB HBM3', gpuClass: 'H100-80GB', memoryTotalBytes: 85_899_345_920, memoryUsedBytes: 0, healthy: true },
    { index: 1, uuid: 'GPU-bbbb', name: 'NVIDIA H100 80GB HBM3', gpuClass: 'H100-80GB', memoryTotalBytes: 85_899_345_920, healthy: true },
  ],
  cpuCores: 64,
  memoryBytes: 1_099_511_627_776,
  cache: { dir: '/var/lib/llmgw/cache', totalBytes: 4_000_000_000_000, freeBytes: 3_000_000_000_000, entries: [{ name: 'w-1', sizeBytes: 42, modifiedAt: 1_767_225_600_000 }] },
  state: 'healthy',
  cordoned: false,
  draining: false,
  lastSeen: 1_767_225_600_123,
};

describe.each(testBackends())('nodes on $name', (backend) => {
  let db: TestDatabase;
  let store: Store;
  beforeEach(async () => {
    db = await backend.create();
    store = await openStore(db.url);
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('round-trips a node exactly, unknown values staying absent', async () => {
    await store.nodes.upsert(node);
    expect(await store.nodes.get('gpu-01')).toEqual(node);
    const cpu: NodeRecord = { ...node, id: 'cpu-01', fabric: undefined, gpus: [], lastSeen: undefined };
    delete (cpu as { fabric?: string }).fabric;
    delete (cpu as { lastSeen?: number }).lastSeen;
    await store.nodes.upsert(cpu);
    const stored = await store.nodes.get('cpu-01');
    expect(stored).toEqual(cpu);
    expect(stored).not.toHaveProperty('fabric');
    expect(stored).not.toHaveProperty('lastSeen');
    expect((await store.nodes.list()).map((n) => n.id)).toEqual(['cpu-01', 'gpu-01']);
  });

  it('keeps an operator cordon when the agent registers again; state and lastSeen move with heartbeats', async () => {
    await store.nodes.upsert(node);
    await store.nodes.setCordoned('gpu-01', true);
    await store.nodes.upsert({ ...node, address: '10.0.0.12', lastSeen: node.lastSeen! + 5_000 });
    expect(await store.nodes.get('gpu-01')).toMatchObject({ cordoned: true, address: '10.0.0.12', lastSeen: node.lastSeen! + 5_000 });
    await store.nodes.setState('gpu-01', 'unreachable');
    await store.nodes.setState('gpu-01', 'healthy', node.lastSeen! + 9_000);
    expect(await store.nodes.get('gpu-01')).toMatchObject({ state: 'healthy', lastSeen: node.lastSeen! + 9_000 });
    await expect(store.nodes.setCordoned('nope', true)).rejects.toMatchObject({ code: ErrorCode.NotFound });
    await expect(store.nodes.setState('nope', 'lost')).rejects.toMatchObject({ code: ErrorCode.NotFound });
    expect(await store.nodes.remove('gpu-01')).toBe(true);
    expect(await store.nodes.remove('gpu-01')).toBe(false);
  });

  it('keeps an operator drain when the agent registers again; a plain cordon or an uncordon ends it', async () => {
    const flags = async () => {
      const stored = await store.nodes.get('gpu-01');
      return { cordoned: stored?.cordoned, draining: stored?.draining };
    };
    await store.nodes.upsert(node);
    await store.nodes.upsert({ ...node, id: 'gpu-02' });
    await store.nodes.setCordoned('gpu-01', true, true);
    expect(await flags()).toEqual({ cordoned: true, draining: true });
    // The agent reconnects and reports itself (cordoned: false is its stale view): the drain stays.
    await store.nodes.upsert({ ...node, address: '10.0.0.12', lastSeen: node.lastSeen! + 5_000 });
    await store.nodes.setState('gpu-01', 'healthy', node.lastSeen! + 9_000);
    expect(await store.nodes.get('gpu-01')).toMatchObject({ cordoned: true, draining: true, address: '10.0.0.12', lastSeen: node.lastSeen! + 9_000 });
    expect((await store.nodes.list()).map((n) => [n.id, n.draining])).toEqual([
      ['gpu-01', true],
      ['gpu-02', false],
    ]);

    await store.nodes.setCordoned('gpu-01', true);
    expect(await flags()).toEqual({ cordoned: true, draining: false });
    await store.nodes.setCordoned('gpu-01', true, true);
    await store.nodes.setCordoned('gpu-01', false);
    expect(await flags()).toEqual({ cordoned: false, draining: false });
    // Never draining without a cordon.
    await store.nodes.setCordoned('gpu-01', false, true);
    expect(await flags()).toEqual({ cordoned: false, draining: false });
    await expect(store.nodes.setCordoned('nope', true, true)).rejects.toMatchObject({ code: ErrorCode.NotFound });
  });

  it('binds a node id to the first credential only; forgetting the node removes the binding with it', async () => {
    expect(await store.nodes.credentialHash('gpu-01')).toBeUndefined();
    // Bound before the node's first report is stored.
    expect(await store.nodes.bindCredential('gpu-01', 'hash-a', 1_767_225_600_000)).toBe(true);
    expect(await store.nodes.bindCredential('gpu-01', 'hash-b', 1_767_225_600_001)).toBe(false);
    expect(await store.nodes.credentialHash('gpu-01')).toBe('hash-a');
    await store.nodes.upsert(node);
    await store.nodes.upsert({ ...node, address: '10.9.9.9' });
    expect(await store.nodes.credentialHash('gpu-01')).toBe('hash-a');

    expect(await store.nodes.remove('gpu-01')).toBe(true);
    expect(await store.nodes.get('gpu-01')).toBeUndefined();
    expect(await store.nodes.credentialHash('gpu-01')).toBeUndefined();
    // A re-installed machine binds the id again.
    expect(await store.nodes.bindCredential('gpu-01', 'hash-c', 1_767_225_600_002)).toBe(true);
    expect(await store.nodes.credentialHash('gpu-01')).toBe('hash-c');
    // Releasing undoes only the binding to that exact hash (a secret that never reached its agent).
    expect(await store.nodes.releaseCredential('gpu-01', 'hash-a')).toBe(false);
    expect(await store.nodes.credentialHash('gpu-01')).toBe('hash-c');
    expect(await store.nodes.releaseCredential('gpu-01', 'hash-c')).toBe(true);
    expect(await store.nodes.credentialHash('gpu-01')).toBeUndefined();
    expect(await store.nodes.bindCredential('gpu-01', 'hash-c', 1_767_225_600_003)).toBe(true);
    // A binding without a stored node is removed too.
    expect(await store.nodes.remove('gpu-01')).toBe(true);
    expect(await store.nodes.remove('gpu-01')).toBe(false);
  });
});
