import type { EndpointState } from '../endpoints/endpoint.state';

/**
 * Why an endpoint was chosen, for metrics and the debug header. `prefix-affinity` with `rank` 0
 * is a hit (the prefix's home replica); a higher rank is a miss after `deflectedFrom` were
 * passed over by the guard (or, `busier`, by the two choices). `fallback` says why a prefix-affinity request was chosen by load:
 * no prompt to key on, or every replica saturated.
 */
export type ChoiceReason =
  | { readonly policy: 'least-load' | 'round-robin' | 'only-candidate' }
  | {
      readonly policy: 'prefix-affinity';
      readonly rank: number;
      readonly deflectedFrom: readonly string[];
      readonly cap: number;
      readonly averageCap: number;
      readonly blocks: number;
      /** The key's first replica under both caps, passed over for more requests awaiting output or, for a cold key, by load (libs/routing AffinityChoice.busier). */
      readonly busier?: string;
      /** The key was cold: this router had not placed it lately, so it went by load among the replicas under both caps (libs/routing AffinityChoice.cold). */
      readonly cold?: true;
    }
  | { readonly policy: 'least-load'; readonly fallback: 'no-prefix' | 'all-saturated' };

/**
 * The replicas a prefix-affinity choice passed over that count as deflections: those the load
 * guard passed over (at a cap or saturated) and, for a warm key, the home the two choices passed
 * for its runner-up. A cold key's pick by load is no deflection: of its passes, only the guard's
 * (those before the first replica under both caps, `busier`) count.
 */
export function deflections(reason: Extract<ChoiceReason, { readonly policy: 'prefix-affinity' }>): number {
  if (reason.cold !== true || reason.busier === undefined) return reason.deflectedFrom.length;
  return reason.deflectedFrom.indexOf(reason.busier);
}

/** What a lease needs from admission: the time, and a way to let the model's queue move when a slot frees. */
export interface LeaseIssuer {
  now(): number;
  wake(model: string): void;
}

/**
 * One request's hold on one endpoint: the slot is taken when the lease is made (so nobody else
 * can take it), and given back once, with the request's outcome, by `release` — which also lets
 * the model's queued requests move. `renew` is the stale-connection retry: the same endpoint,
 * given back as abandoned and taken again.
 */
export class EndpointLease {
  private held = true;
  private hadOutput = false;

  constructor(
    private readonly issuer: LeaseIssuer,
    readonly state: EndpointState,
    readonly reason: ChoiceReason,
    /** Time spent queued, ms (0 when routed at once). */
    readonly queuedMs: number,
  ) {
    state.acquire(issuer.now());
  }

  /** False once released. */
  get active(): boolean {
    return this.held;
  }

  /** The engine's first response body arrived: the endpoint no longer counts this request as waiting for output. Once. */
  outputStarted(): void {
    if (!this.held || this.hadOutput) return;
    this.hadOutput = true;
    this.state.outputStarted();
  }

  /** Gives the endpoint back with the request's outcome and wakes the model's queue; a second call does nothing. */
  release(outcome: 'success' | 'failure' | 'abandoned'): void {
    if (!this.held) return;
    this.held = false;
    this.state.release(outcome, this.hadOutput);
    this.issuer.wake(this.state.endpoint.model);
  }

  /** The same endpoint again, for a resend after a pooled connection the engine had closed: this lease is released as abandoned. */
  renew(): EndpointLease {
    this.release('abandoned');
    return new EndpointLease(this.issuer, this.state, this.reason, this.queuedMs);
  }
}
