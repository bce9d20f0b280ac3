import type { Replica, ReplicaMember, ReplicaState } from '@llmgw/domain';

/**
 * One replica as the leader tracks it: the stored record (`replica`) plus bookkeeping that never
 * leaves this process. Immutable: every change makes a new entry.
 */
export interface ReplicaEntry {
  readonly replica: Replica;
  /** Per member node, the state its agent last reported; absent = nothing reported yet. */
  readonly memberStates: Readonly<Record<string, ReplicaState>>;
  /** The store holds a row for it (false while an adopted replica waits for its first write). */
  readonly persisted: boolean;
  /** The in-memory record differs from the stored row. */
  readonly dirty: boolean;
  /** Last FetchWeights/StartReplica sent for it, ms. */
  readonly commandSentAt?: number;
  /** Member nodes whose weights fetch is in flight. */
  readonly fetching: readonly string[];
  /** Last StopReplica sent, ms. */
  readonly stopSentAt?: number;
  /** When it last failed, and when it may be retried (restart in place or move). */
  readonly failedAt?: number;
  readonly retryAt?: number;
  /** Why it is being stopped (surplus, model removed, moved, drained, unknown). */
  readonly stopReason?: string;
}

/** States in which a replica holds its place and counts toward its model's replicas. */
export const LIVE_STATES: ReadonlySet<ReplicaState> = new Set(['pending', 'fetching', 'starting', 'ready', 'failed']);

/** States after which only the record is left to remove. */
export const GONE_STATES: ReadonlySet<ReplicaState> = new Set(['stopped', 'lost']);

/**
 * True when `member` of a multi-node replica cannot be started yet: it is not rank 0 and rank 0
 * has not reported the rendezvous port its agent picked.
 */
export function awaitsRendezvous(member: ReplicaMember, members: readonly ReplicaMember[]): boolean {
  return members.length > 1 && member.rank !== 0 && members.find((m) => m.rank === 0)?.rendezvousPort === undefined;
}
