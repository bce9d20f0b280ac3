import { describe, expect, it } from 'vitest';
import { KvBlockPool } from './kv-block.pool';

describe('KvBlockPool', () => {
  it('reserves and releases private blocks without prefix caching', () => {
    const pool = new KvBlockPool(10, 16, false);
    const a = pool.allocate([1, 2, 3], 6, 3);
    expect(a).toMatchObject({ hitBlocks: 0, privateBlocks: 6 });
    expect(pool.allocate([], 5, 0)).toBeUndefined(); // 6 + 5 > 10
    expect(pool.usedBlocks).toBe(6);
    pool.commit(a!, [1, 2, 3]); // no-op without caching
    pool.release(a!);
    expect(pool.usedBlocks).toBe(0);
    expect(pool.matchPrefix([1, 2, 3])).toBe(0);
  });

  it('caches committed prompt blocks, shares them, and counts released ones as free but reusable', () => {
    const pool = new KvBlockPool(10, 16, true);
    const a = pool.allocate([11, 12, 13], 4, 3)!;
    pool.commit(a, [11, 12, 13]);
    expect(a).toMatchObject({ shared: [11, 12, 13], privateBlocks: 1 });
    expect(pool.usedBlocks).toBe(4);
    const b = pool.allocate([11, 12, 99], 4, 3)!;
    expect(b.hitBlocks).toBe(2);
    expect(pool.usedBlocks).toBe(6); // 3 cached (shared) + 1 + 2 private
    pool.release(a);
    pool.release(b);
    expect(pool.usedBlocks).toBe(0);
    expect(pool.evictableBlocks).toBe(3);
    expect(pool.matchPrefix([11, 12, 13, 14])).toBe(3);
    expect(pool.matchPrefix([99, 11])).toBe(0); // only leading runs match
  });

  it('shares a block another sequence cached meanwhile instead of keeping two copies', () => {
    const pool = new KvBlockPool(10, 16, true);
    const a = pool.allocate([1, 2], 2, 2)!;
    const b = pool.allocate([1, 2], 2, 2)!; // both admitted before either computed anything
    expect(pool.usedBlocks).toBe(4);
    pool.commit(a, [1, 2]);
    pool.commit(b, [1, 2]);
    expect(pool.usedBlocks).toBe(2);
    pool.release(a);
    expect(pool.usedBlocks).toBe(2);
    pool.release(b);
    expect(pool.usedBlocks).toBe(0);
  });

  it('evicts least recently released blocks, the tail of a prefix before its head, only when space is needed', () => {
    const pool = new KvBlockPool(4, 16, true);
    const a = pool.allocate([1, 2, 3], 3, 3)!;
    pool.commit(a, [1, 2, 3]);
    pool.release(a);
    const b = pool.allocate([], 2, 0)!; // 1 truly free + evict 1: the tail block 3
    expect(pool.evictedBlocks).toBe(1);
    expect(pool.matchPrefix([1, 2, 3])).toBe(2);
    pool.release(b);
    // Re-using a cached block makes it recent again.
    const c = pool.allocate([1], 1, 1)!;
    expect(c.hitBlocks).toBe(1);
    pool.release(c);
    pool.allocate([], 4, 0);
    expect(pool.matchPrefix([1, 2])).toBe(0);
    expect(pool.usedBlocks).toBe(4);
  });

  it('does not revive cached blocks it cannot pin and still fit the rest', () => {
    const pool = new KvBlockPool(4, 16, true);
    const a = pool.allocate([1, 2], 2, 2)!;
    pool.commit(a, [1, 2]);
    pool.release(a);
    // Needs the 2 cached blocks plus 3 new: 5 > 4.
    expect(pool.allocate([1, 2], 5, 2)).toBeUndefined();
    expect(pool.evictableBlocks).toBe(2);
    expect(pool.usedBlocks).toBe(0);
  });
});
