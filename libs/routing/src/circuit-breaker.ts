import type { Clock } from '@llmgw/domain';
import type { BreakerState } from './candidate';

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  readonly failureThreshold: number;
  /** How long it stays open before one probe is let through, ms. */
  readonly cooldownMs: number;
}

/** A state change, for metrics and logs. */
export interface BreakerTransition {
  readonly from: BreakerState;
  readonly to: BreakerState;
}

/**
 * Per-endpoint circuit breaker: `failureThreshold` consecutive failures open it; after
 * `cooldownMs` it is half-open and admits exactly one probe; the probe's success closes it,
 * its failure opens it again for another cooldown. Time comes from the injected clock.
 */
export class CircuitBreaker {
  private stateValue: BreakerState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private probeOut = false;

  constructor(
    private readonly clock: Clock,
    private readonly options: BreakerOptions,
    private readonly onTransition?: (t: BreakerTransition) => void,
  ) {}

  /** Current state; an open breaker whose cooldown passed reads as half-open. */
  get state(): BreakerState {
    if (this.stateValue === 'open' && this.clock.now() - this.openedAt >= this.options.cooldownMs) {
      this.move('half-open');
      this.probeOut = false;
    }
    return this.stateValue;
  }

  /** True when a request may be sent now (closed, or half-open with the probe free). */
  get available(): boolean {
    const s = this.state;
    return s === 'closed' || (s === 'half-open' && !this.probeOut);
  }

  /** Called when a request is sent; in half-open this takes the single probe. */
  onAcquire(): void {
    if (this.state === 'half-open') this.probeOut = true;
  }

  onSuccess(): void {
    this.failures = 0;
    if (this.state !== 'closed') this.move('closed');
    this.probeOut = false;
  }

  onFailure(): void {
    const s = this.state;
    this.failures++;
    if (s === 'half-open' || (s === 'closed' && this.failures >= this.options.failureThreshold)) {
      this.openedAt = this.clock.now();
      this.probeOut = false;
      this.move('open');
    }
  }

  /** A request that ended without a verdict (client went away): frees a taken probe. */
  onAbandon(): void {
    this.probeOut = false;
  }

  private move(to: BreakerState): void {
    const from = this.stateValue;
    if (from === to) return;
    this.stateValue = to;
    this.onTransition?.({ from, to });
  }
}
