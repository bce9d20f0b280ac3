import type { Fence } from './lease-store.port';

/** Why a term ended: the claim lapsed without renewal, another owner holds it, or stop() was called. */
export type LeadershipEndReason = 'expired' | 'lost' | 'stopped';

/** A term that began: this process may now place and evict. */
export interface LeadershipTerm {
  readonly ownerId: string;
  /** The lease generation of this term; absent when no lease is configured. */
  readonly generation?: number;
  /** Clock time the term began, ms since the epoch. */
  readonly startedAt: number;
}

/** A term that ended. `at` is when leadership stopped being valid, which may precede the callback. */
export interface LeadershipEnd {
  readonly ownerId: string;
  readonly generation?: number;
  readonly reason: LeadershipEndReason;
  /** Clock time leadership ended, ms since the epoch (for `expired`: the end of the kept claim). */
  readonly at: number;
}

/** Callbacks a leadership source calls; a callback that throws is reported through `onError`. */
export interface LeadershipCallbacks {
  onStartedLeading?(term: LeadershipTerm): void;
  onStoppedLeading?(end: LeadershipEnd): void;
  /** A store call or a callback failed; the elector carries on (see README for what it keeps). */
  onError?(error: unknown): void;
}

/**
 * Whether this process may act (reconcile, place, evict). Implemented by {@link LeaderElector}
 * (a lease in the store) and {@link AlwaysLeader} (no lease configured).
 */
export interface Leadership {
  /** Random id of this process start; never a hostname. */
  readonly ownerId: string;
  /** True while this process leads; reads the clock, so it turns false exactly when a kept claim ends. */
  isLeader(): boolean;
  /** Generation of the current term, or undefined when not leading or when no lease is configured. */
  readonly generation: number | undefined;
  /** The fence store writes must carry; throws DomainError `fenced` when not leading. */
  fence(): Fence;
  /** Begins taking part (elector: first claim attempt now, then every renew interval). */
  start(): void;
  /** Stops leading (callback first), releases the claim if held, and stops all timers. */
  stop(): Promise<void>;
}
