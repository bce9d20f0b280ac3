/**
 * The modelled KV cache: a fixed number of blocks of `blockSize` tokens.
 *
 * A running sequence holds blocks for its whole prompt plus its planned output (reserved at
 * admission, so a running sequence never runs out and is never preempted). With prefix caching
 * on, full prompt blocks are named by a chained hash of their tokens once computed; a later
 * sequence whose prompt starts with the same blocks shares them instead of computing them
 * again. Blocks no sequence holds any more stay cached but count as free: they are evicted,
 * least recently released first, when new blocks are needed (vLLM's model).
 *
 * Invariant: `usedBlocks + evictable blocks <= capacityBlocks`.
 */
export class KvBlockPool {
  private used = 0;
  /** Cached blocks by hash; refs = number of live sequences holding the block. */
  private readonly entries = new Map<number, { refs: number }>();
  /** Cached blocks nobody holds, oldest first (Map keeps insertion order). */
  private readonly evictable = new Map<number, true>();
  private evictions = 0;

  constructor(
    readonly capacityBlocks: number,
    readonly blockSize: number,
    readonly prefixCaching: boolean,
  ) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 1) throw new RangeError(`capacityBlocks must be a positive integer, got ${capacityBlocks}`);
    if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  }

  /** Blocks held by live sequences (a block shared by several counts once). */
  get usedBlocks(): number {
    return this.used;
  }

  /** Cached blocks nobody holds: reusable, and free for the taking. */
  get evictableBlocks(): number {
    return this.evictable.size;
  }

  /** Cached blocks evicted so far. */
  get evictedBlocks(): number {
    return this.evictions;
  }

  /** Number of leading hashes, at most `limit`, whose blocks are cached. */
  matchPrefix(hashes: readonly number[], limit = hashes.length): number {
    if (!this.prefixCaching) return 0;
    const n = Math.min(limit, hashes.length);
    let i = 0;
    while (i < n && this.entries.has(hashes[i])) i++;
    return i;
  }

  /**
   * Reserves `totalBlocks` blocks for a sequence whose full prompt blocks hash to `promptHashes`,
   * reusing at most `maxHitBlocks` cached leading blocks. Returns undefined, changing nothing,
   * when the blocks do not fit now.
   */
  allocate(promptHashes: readonly number[], totalBlocks: number, maxHitBlocks: number): KvAllocation | undefined {
    const hit = Math.min(this.matchPrefix(promptHashes, maxHitBlocks), totalBlocks);
    const hits = promptHashes.slice(0, hit);
    let revived = 0;
    for (const h of hits) if (this.entries.get(h)?.refs === 0) revived++;
    const fresh = totalBlocks - hit;
    if (fresh > this.capacityBlocks - this.used - revived) return undefined;
    for (const h of hits) this.pin(h);
    const trulyFree = this.capacityBlocks - this.used - this.evictable.size;
    for (let need = fresh - trulyFree; need > 0; need--) this.evictOldest();
    this.used += fresh;
    return { hitBlocks: hit, shared: hits, privateBlocks: fresh };
  }

  /**
   * Makes a sequence's computed full prompt blocks reusable (call once its prefill is done).
   * A block another sequence cached meanwhile is shared instead of kept twice.
   */
  commit(alloc: KvAllocation, promptHashes: readonly number[]): void {
    if (!this.prefixCaching) return;
    for (let i = alloc.shared.length; i < promptHashes.length && alloc.privateBlocks > 0; i++) {
      const h = promptHashes[i];
      const entry = this.entries.get(h);
      if (entry === undefined) {
        this.entries.set(h, { refs: 1 }); // the private block becomes the cached one
      } else {
        this.pin(h); // already cached: hold that one, give ours back
        this.used--;
      }
      alloc.privateBlocks--;
      alloc.shared.push(h);
    }
  }

  /** Gives back everything `alloc` holds. Cached blocks stay reusable until evicted. */
  release(alloc: KvAllocation): void {
    this.used -= alloc.privateBlocks;
    alloc.privateBlocks = 0;
    // Last block first, so the tail of a prefix is evicted before its head.
    for (let i = alloc.shared.length - 1; i >= 0; i--) {
      const h = alloc.shared[i];
      const entry = this.entries.get(h);
      if (entry === undefined) continue;
      entry.refs--;
      if (entry.refs === 0) {
        this.used--;
        this.evictable.set(h, true);
      }
    }
    alloc.shared.length = 0;
  }

  private pin(h: number): void {
    const entry = this.entries.get(h);
    if (entry === undefined) return;
    if (entry.refs === 0) {
      this.evictable.delete(h);
      this.used++;
    }
    entry.refs++;
  }

  private evictOldest(): void {
    const oldest = this.evictable.keys().next();
    if (oldest.done) throw new Error('KvBlockPool: nothing to evict (accounting bug)');
    this.evictable.delete(oldest.value);
    this.entries.delete(oldest.value);
    this.evictions++;
  }
}

/** What one sequence holds in the pool. Mutated only by the pool. */
export interface KvAllocation {
  /** Leading prompt blocks found in the cache at admission. */
  readonly hitBlocks: number;
  /** Cached blocks this sequence holds a reference to, in prompt order. */
  shared: number[];
  /** Blocks only this sequence holds. */
  privateBlocks: number;
}
