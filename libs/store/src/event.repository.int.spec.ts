import { ErrorCode } from '@llmgw/domain';
import { FakeClock, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './store.factory';
import type { EventKind } from './store.ports';

describe.each(testBackends())('events on $name', (backend) => {
  let db: TestDatabase;
  let store: Store;
  let clock: FakeClock;
  beforeEach(async () => {
    clock = new FakeClock();
    db = await backend.create();
    store = await openStore(db.url, { clock, eventRetention: 5 });
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('keeps only the newest N events, newest first, with absent fields absent', async () => {
    for (let i = 1; i <= 8; i++) {
      clock.advance(10);
      await store.events.record({ kind: i % 2 ? 'placed' : 'evicted', model: `m${i % 2}`, replicaId: `r${i}`, reason: i === 8 ? 'idle longest' : undefined });
    }
    const events = await store.events.list();
    expect(events.map((e) => e.replicaId)).toEqual(['r8', 'r7', 'r6', 'r5', 'r4']);
    expect(events[0]).toEqual({ id: events[0].id, time: clock.now(), kind: 'evicted', model: 'm0', replicaId: 'r8', reason: 'idle longest' });
    expect(events[1]).not.toHaveProperty('nodeId');
    expect(events[1]).not.toHaveProperty('reason');
    expect(events.map((e) => e.id)).toEqual([...events.map((e) => e.id)].sort((a, b) => b - a));
  });

  it('filters by model, replica and node, and pages backwards by id', async () => {
    const kinds: EventKind[] = ['placed', 'refused', 'lost'];
    for (const [i, kind] of kinds.entries()) await store.events.record({ kind, model: 'llama', nodeId: `n${i}`, time: 1_000 + i });
    await store.events.record({ kind: 'placed', model: 'qwen', replicaId: 'q1' });
    expect((await store.events.list({ model: 'llama' })).map((e) => e.kind)).toEqual(['lost', 'refused', 'placed']);
    expect((await store.events.list({ nodeId: 'n1' })).map((e) => [e.kind, e.time])).toEqual([['refused', 1_001]]);
    expect((await store.events.list({ replicaId: 'q1' })).map((e) => e.model)).toEqual(['qwen']);
    const [newest] = await store.events.list({ limit: 1 });
    expect(newest.model).toBe('qwen');
    expect((await store.events.list({ beforeId: newest.id, limit: 2 })).map((e) => e.kind)).toEqual(['lost', 'refused']);
  });

  it('refuses an unknown kind', async () => {
    await expect(store.events.record({ kind: 'exploded' as EventKind })).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
  });
});
