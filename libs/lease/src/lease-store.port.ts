/**
 * One row of the lease table as the store returned it. Times are ms since the epoch, read
 * from the clocks of the processes that wrote them (see README: clock skew).
 */
export interface LeaseRecord {
  readonly name: string;
  readonly owner: string;
  /** Grows by one each time the lease passes to a different owner; never changes on renewal. */
  readonly generation: number;
  /** The claim is valid while a reader's clock is below this. */
  readonly expiresAt: number;
  /** When the current owner first took the lease. */
  readonly acquiredAt: number;
}

/**
 * What leader election needs from a store (the elector owns this port; libs/store implements it).
 */
export interface LeaseStore {
  /**
   * Acquires or renews `name` for `owner` until `now + ttlMs` in one atomic step. It succeeds
   * when the row is absent, already ours, or expired (`expiresAt <= now`), and then returns the
   * row as written; it returns `undefined` when another owner holds an unexpired claim.
   * Throws when the store cannot answer (which says nothing about who leads).
   */
  claim(name: string, owner: string, now: number, ttlMs: number): Promise<LeaseRecord | undefined>;
  /** Ends `owner`'s claim on `name` at once so a standby can take over; a no-op if not ours. */
  release(name: string, owner: string): Promise<void>;
}

/**
 * Proof of leadership that store writes check in their own transaction. `none` means no lease
 * is configured: the single controller writes unconditionally. A `lease` fence is honoured only
 * while the row still has this owner and generation and has not expired.
 */
export type Fence =
  | { readonly kind: 'none' }
  | { readonly kind: 'lease'; readonly lease: string; readonly owner: string; readonly generation: number };

/** The fence of an install without a lease: writes are never refused for leadership. */
export const NO_FENCE: Fence = Object.freeze({ kind: 'none' });
