import type { Clock } from '@llmgw/domain';

/**
 * Completions per second as an exponentially weighted moving average over time, with the
 * given half-life. `rate()` is undefined until enough time has been observed to say anything:
 * an endpoint that has completed nothing yet has an unknown rate, not a rate of 0.
 */
export class DrainRate {
  private value: number | undefined;
  private pending = 0;
  private windowStart: number;

  constructor(
    private readonly clock: Clock,
    private readonly halfLifeMs = 5_000,
    private readonly bucketMs = 250,
  ) {
    this.windowStart = clock.now();
  }

  /** Records one completed request. */
  record(): void {
    this.roll();
    this.pending++;
  }

  /** Completions per second, or undefined before the first full bucket. */
  rate(): number | undefined {
    this.roll();
    return this.value;
  }

  private roll(): void {
    const now = this.clock.now();
    const elapsed = now - this.windowStart;
    if (elapsed < this.bucketMs) return;
    const observed = (this.pending * 1000) / elapsed;
    const alpha = 1 - Math.pow(0.5, elapsed / this.halfLifeMs);
    this.value = this.value === undefined ? observed : this.value + alpha * (observed - this.value);
    this.pending = 0;
    this.windowStart = now;
  }
}
