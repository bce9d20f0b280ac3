/**
 * How long the load guard remembers: the time constant of the load average (ms). Long enough that
 * a replica taking one request more for a moment is not passed over, short enough that one kept
 * above the cap by a popular prefix is within a few seconds.
 */
export const LOAD_AVERAGE_TAU_MS = 5_000;

/**
 * The time-weighted exponential moving average of a signal that holds its value between changes
 * (a replica's load): over a stretch of `dt` ms at value v, the average moves towards v by
 * 1 − e^(−dt/τ). Pure: the caller says when.
 */
export class LoadAverage {
  private average = 0;
  private value = 0;
  private since: number | undefined;

  constructor(readonly tauMs: number = LOAD_AVERAGE_TAU_MS) {
    if (!(Number.isFinite(tauMs) && tauMs > 0)) throw new RangeError(`LoadAverage: tauMs must be a finite number > 0, got ${tauMs}`);
  }

  /** The signal is `value` from `now` on (times before the last change count as the last change). */
  set(now: number, value: number): void {
    this.average = this.read(now);
    this.since = this.since === undefined ? now : Math.max(this.since, now);
    this.value = value;
  }

  /** The average as of `now`; 0 before the first `set`. */
  read(now: number): number {
    if (this.since === undefined) return this.average;
    const dt = Math.max(0, now - this.since);
    return this.average + (1 - Math.exp(-dt / this.tauMs)) * (this.value - this.average);
  }
}
