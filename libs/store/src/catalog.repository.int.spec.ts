import { ErrorCode } from '@llmgw/domain';
import { FakeClock, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './store.factory';

describe.each(testBackends())('catalog revisions on $name', (backend) => {
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

  it('starts empty, appends revisions with author and time, and reads any of them back', async () => {
    expect(await store.catalog.current()).toBeUndefined();
    expect(await store.catalog.currentRevision()).toBe(0);
    const doc1 = { models: [{ name: 'a', sizeBytes: 5_000_000_000 }] };
    expect(await store.catalog.put(doc1, 'alice', 0)).toEqual({ revision: 1, document: doc1, author: 'alice', createdAt: clock.now() });
    clock.advance(1_000);
    const doc2 = { models: [] };
    await store.catalog.put(doc2, 'bob');
    expect(await store.catalog.current()).toEqual({ revision: 2, document: doc2, author: 'bob', createdAt: clock.now() });
    expect(await store.catalog.get(1)).toMatchObject({ document: doc1, author: 'alice' });
    expect(await store.catalog.get(3)).toBeUndefined();
    expect(await store.catalog.history()).toEqual([
      { revision: 2, author: 'bob', createdAt: clock.now() },
      { revision: 1, author: 'alice', createdAt: clock.now() - 1_000 },
    ]);
  });

  it('refuses a stale expected revision and leaves the catalog as it was', async () => {
    await store.catalog.put({ v: 1 }, 'alice', 0);
    await store.catalog.put({ v: 2 }, 'alice', 1);
    await expect(store.catalog.put({ v: 'stale' }, 'bob', 1)).rejects.toMatchObject({ code: ErrorCode.Conflict, message: expect.stringContaining('current is 2') });
    await expect(store.catalog.put({ v: 'first' }, 'bob', 0)).rejects.toMatchObject({ code: ErrorCode.Conflict });
    await expect(store.catalog.put({ v: 'bad' }, 'bob', -1)).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    expect(await store.catalog.current()).toMatchObject({ revision: 2, document: { v: 2 } });
  });

  it('concurrent writers expecting the same revision on separate connections: exactly one wins, none is lost silently', async () => {
    await store.catalog.put({ v: 0 }, 'seed', 0);
    const writers = [store, ...(await Promise.all([1, 2, 3, 4, 5].map(() => openStore(db.url, { clock, migrate: false }))))];
    try {
      const results = await Promise.allSettled(writers.map((s, i) => s.catalog.put({ v: i }, `writer-${i}`, 1)));
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost.map((r) => (r.reason as { code?: string }).code)).toEqual(Array(5).fill(ErrorCode.Conflict));
      expect(await store.catalog.currentRevision()).toBe(2);
      // Unconditional puts from all of them all land, each on its own revision.
      const appended = await Promise.all(writers.map((s, i) => s.catalog.put({ w: i }, `w-${i}`)));
      expect(appended.map((r) => r.revision).sort((a, b) => a - b)).toEqual([3, 4, 5, 6, 7, 8]);
    } finally {
      for (const s of writers.slice(1)) await s.close();
    }
  });
});
