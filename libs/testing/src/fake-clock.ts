import type { Clock, Rng } from '@llmgw/domain';

/** 2026-01-01T00:00:00Z: the time a FakeClock starts at unless told otherwise. */
export const FAKE_CLOCK_START_MS = Date.UTC(2026, 0, 1);

/**
 * A Clock that only moves when told: `advance(ms)` forward, `set(ms)` to an absolute time.
 * Time never goes backwards through `advance`; `set` may move it anywhere (tests of clock skew).
 */
export class FakeClock implements Clock {
  private current: number;

  constructor(startMs: number = FAKE_CLOCK_START_MS) {
    this.current = FakeClock.check('start', startMs);
  }

  /** Milliseconds since the epoch, as last set or advanced. */
  now(): number {
    return this.current;
  }

  /** Moves time forward by `ms` (>= 0) and returns the new time. */
  advance(ms: number): number {
    if (FakeClock.check('advance', ms) < 0) throw new RangeError(`FakeClock.advance: ${ms} ms is negative`);
    this.current += ms;
    return this.current;
  }

  /** Sets the time to `ms` since the epoch. */
  set(ms: number): void {
    this.current = FakeClock.check('set', ms);
  }

  private static check(what: string, ms: number): number {
    if (!Number.isFinite(ms)) throw new RangeError(`FakeClock.${what}: ${ms} is not a finite number of ms`);
    return ms;
  }
}

/**
 * A deterministic Rng (mulberry32): the same seed gives the same sequence on every machine,
 * values uniform in [0, 1).
 */
export class SeededRng implements Rng {
  private state: number;

  constructor(readonly seed: number = 1) {
    if (!Number.isInteger(seed)) throw new RangeError(`SeededRng: seed ${seed} is not an integer`);
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}
