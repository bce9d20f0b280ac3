import { ErrorCode, type Replica } from '@llmgw/domain';
import { NO_FENCE } from '@llmgw/lease';
import { FakeClock, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './store.factory';

const base: Replica = {
  id: 'r-1',
  model: 'llama-3-70b',
  profileIndex: 1,
  engine: 'vllm',
  members: [
    { nodeId: 'gpu-01', rank: 0, gpuIndices: [0, 1, 2, 3], port: 8001 },
    { nodeId: 'gpu-02', rank: 1, gpuIndices: [0, 1, 2, 3] },
  ],
  state: 'pending',
  restarts: 0,
  createdAt: 1_767_225_600_000,
  updatedAt: 1_767_225_600_000,
};

describe.each(testBackends())('replicas on $name', (backend) => {
  let db: TestDatabase;
  let store: Store;
  let clock: FakeClock;
  beforeEach(async () => {
    clock = new FakeClock();
    db = await backend.create();
    store = await openStore(db.url, { clock });
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('places, reads back, updates and evicts; a replica never used has no lastUsedAt', async () => {
    await store.replicas.place(base, NO_FENCE);
    await store.replicas.place({ ...base, id: 'r-2', model: 'qwen', engine: 'llamacpp', members: [{ nodeId: 'cpu-01', rank: 0, gpuIndices: [], port: 9000 }] }, NO_FENCE);
    expect(await store.replicas.get('r-1')).toEqual(base);
    expect(await store.replicas.get('r-1')).not.toHaveProperty('lastUsedAt');
    expect((await store.replicas.list({ model: 'qwen' })).map((r) => r.id)).toEqual(['r-2']);
    await expect(store.replicas.place(base, NO_FENCE)).rejects.toMatchObject({ code: ErrorCode.Conflict });

    const failed = await store.replicas.update('r-1', { state: 'failed', reason: 'engine exited 1', restarts: 2, updatedAt: base.updatedAt + 5 }, NO_FENCE);
    expect(failed).toEqual({ ...base, state: 'failed', reason: 'engine exited 1', restarts: 2, updatedAt: base.updatedAt + 5 });
    const cleared = await store.replicas.update('r-1', { state: 'starting', reason: null, updatedAt: base.updatedAt + 6 }, NO_FENCE);
    expect(cleared).not.toHaveProperty('reason');
    await expect(store.replicas.update('nope', { state: 'ready', updatedAt: 1 }, NO_FENCE)).rejects.toMatchObject({ code: ErrorCode.NotFound });

    expect(await store.replicas.evict('r-1', NO_FENCE)).toBe(true);
    expect(await store.replicas.evict('r-1', NO_FENCE)).toBe(false);
    expect((await store.replicas.list()).map((r) => r.id)).toEqual(['r-2']);
  });

  it('places many replicas in one transaction: all of them, or none when one id is taken', async () => {
    const many = Array.from({ length: 123 }, (_, i): Replica => ({ ...base, id: `r-${String(i).padStart(3, '0')}`, lastUsedAt: i % 2 === 0 ? undefined : 1_767_225_600_500 }));
    await store.replicas.placeAll(many, NO_FENCE);
    expect(await store.replicas.list()).toEqual(many.map((r) => (r.lastUsedAt === undefined ? (({ lastUsedAt: _l, ...rest }) => rest)(r) : r)));
    const clash = [{ ...base, id: 'r-new-1' }, { ...base, id: 'r-007' }, { ...base, id: 'r-new-2' }];
    await expect(store.replicas.placeAll(clash, NO_FENCE)).rejects.toMatchObject({ code: ErrorCode.Conflict });
    expect(await store.replicas.list()).toHaveLength(123);
    await store.replicas.placeAll([], NO_FENCE);
  });

  it('records usage newest-wins and ignores unknown replicas', async () => {
    await store.replicas.place(base, NO_FENCE);
    expect(await store.replicas.recordUsage(new Map([['r-1', 5_000], ['ghost', 9_000]]))).toBe(1);
    expect(await store.replicas.recordUsage(new Map([['r-1', 4_000]]))).toBe(0);
    expect((await store.replicas.get('r-1'))?.lastUsedAt).toBe(5_000);
    await store.replicas.recordUsage(new Map([['r-1', 6_000]]));
    expect((await store.replicas.get('r-1'))?.lastUsedAt).toBe(6_000);
  });

  it('lists recorded usage, leaving out replicas nobody reported', async () => {
    await store.replicas.place(base, NO_FENCE);
    await store.replicas.place({ ...base, id: 'r-2' }, NO_FENCE);
    expect(await store.replicas.listUsage()).toEqual(new Map());
    await store.replicas.recordUsage(new Map([['r-2', 1_700_000_000_123]]));
    expect(await store.replicas.listUsage()).toEqual(new Map([['r-2', 1_700_000_000_123]]));
  });

  it('fenced writes need the current lease generation; a refused write changes nothing', async () => {
    const now = clock.now();
    const claim = await store.leases.claim('controller', 'leader-a', now, 10_000);
    const fenceA = { kind: 'lease', lease: 'controller', owner: 'leader-a', generation: claim!.generation } as const;
    await store.replicas.place(base, fenceA);
    await expect(store.replicas.place({ ...base, id: 'r-x' }, { ...fenceA, generation: 2 })).rejects.toMatchObject({ code: ErrorCode.Fenced });
    await expect(store.replicas.place({ ...base, id: 'r-y' }, { ...fenceA, owner: 'someone' })).rejects.toMatchObject({ code: ErrorCode.Fenced });
    await expect(store.replicas.place({ ...base, id: 'r-z' }, { ...fenceA, lease: 'other' })).rejects.toMatchObject({ code: ErrorCode.Fenced });
    expect((await store.replicas.list()).map((r) => r.id)).toEqual(['r-1']);
  });
});
