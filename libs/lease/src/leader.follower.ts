import { backoffDelay, type Rng } from '@llmgw/domain';
import type { LeaseRecord } from './lease-store.port';

/** Reconnect delay bounds of a {@link LeaderFollower}, ms. */
export interface FollowBounds {
  /** First backoff step, and the pause between rounds in which some controller answered NotLeader. */
  readonly minMs: number;
  /** Largest backoff step after rounds in which no controller answered at all. */
  readonly maxMs: number;
}

/** How one attempt at {@link LeaderFollower.current} ended. */
export type FollowOutcome =
  /** A controller answered that it does not lead, naming the leader when it knows a live one. */
  | { readonly kind: 'notLeader'; readonly leaderAddress?: string }
  /** No answer, an error, or a stream (welcomed or not) that ended. */
  | { readonly kind: 'failed' };

/**
 * Which controller address to try next, and after how long: the rule agents and routers share.
 * - The list is tried in rounds; within a round the next address is tried at once.
 * - A NotLeader naming another address is followed at once; at most one redirect per address
 *   in the list in a row, so two standbys naming each other cannot loop without pause.
 * - A round in which some controller answered NotLeader ends with a short pause (jittered
 *   `minMs`) that never grows: a standby answering means a leader is about to be found.
 * - A round in which nothing answered ends with a jittered exponential backoff from `minMs` to
 *   `maxMs` ("equal jitter": uniformly in [half, all] of the step), so a fleet that lost its
 *   controllers at one moment does not come back in lock step.
 * - `connected()` (a leader welcomed us) starts everything over.
 */
export class LeaderFollower {
  private index = 0;
  private redirect: string | undefined;
  private redirectsInRow = 0;
  private attemptsInRound = 0;
  private heardInRound = false;
  private failedRounds = 0;

  constructor(
    private readonly addresses: readonly string[],
    private readonly bounds: FollowBounds,
    private readonly rng: Rng,
  ) {
    if (addresses.length === 0) throw new Error('no controller addresses');
  }

  /** The address to try now: a redirect being followed, else the list's current one. */
  current(): string {
    return this.redirect ?? (this.addresses[this.index] as string);
  }

  /** The attempt at `current()` reached the leader: the next failure starts a fresh round. */
  connected(): void {
    this.redirectsInRow = 0;
    this.attemptsInRound = 0;
    this.heardInRound = false;
    this.failedRounds = 0;
  }

  /** Records how the attempt at `current()` ended; returns the delay (ms) before trying `current()` again. */
  next(outcome: FollowOutcome): number {
    const tried = this.current();
    this.redirect = undefined;
    if (outcome.kind === 'notLeader') {
      this.heardInRound = true;
      const to = outcome.leaderAddress;
      if (to !== undefined && to !== '' && to !== tried && this.redirectsInRow < this.addresses.length) {
        this.redirectsInRow += 1;
        this.redirect = to;
        return 0;
      }
    } else {
      this.redirectsInRow = 0;
    }
    this.index = (this.index + 1) % this.addresses.length;
    this.attemptsInRound += 1;
    if (this.attemptsInRound < this.addresses.length) return 0;
    this.attemptsInRound = 0;
    this.redirectsInRow = 0;
    if (this.heardInRound) {
      this.heardInRound = false;
      return reconnectDelay(1, this.bounds, this.rng);
    }
    this.failedRounds += 1;
    return reconnectDelay(this.failedRounds, this.bounds, this.rng);
  }
}

/**
 * Delay before reconnect attempt `failures` (1 = after the first failure): exponential from
 * `minMs`, capped at `maxMs`, with "equal jitter" — uniformly in [half, all] of that step — so a
 * fleet that lost its controller at the same moment does not come back in lock step, while no
 * delay is ever shorter than half its step.
 */
export function reconnectDelay(failures: number, bounds: FollowBounds, rng: Rng): number {
  const step = backoffDelay(failures, bounds);
  return Math.round(step / 2 + (rng.next() * step) / 2);
}

/**
 * Whether the holder of a lease row is still renewing it, as a standby judges before naming it
 * as the leader: its claim is unexpired at `now` and has not gone two renewal intervals without
 * being renewed (a renewing holder's claim always has more than `ttlMs - 2 × renewIntervalMs`
 * left). A leader that died keeps an unexpired row for up to `ttlMs`; this tells it apart after
 * two missed renewals instead. Uses the standby's clock against the row's times, like every
 * lease reading (README: clock skew).
 */
export function holderRenewing(record: Pick<LeaseRecord, 'expiresAt'>, now: number, ttlMs: number, renewIntervalMs: number): boolean {
  const left = record.expiresAt - now;
  return left > 0 && left > ttlMs - 2 * renewIntervalMs;
}
