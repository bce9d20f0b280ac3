import type { Clock, Scheduler } from './clock';

// The runtime's clock and timers behind the domain's ports: the one implementation apps wire in.
// The only file of a pure lib allowed to read the clock and set timers (eslint.config.mjs).

/** Wall-clock time (Date.now()). */
export const systemClock: Clock = { now: () => Date.now() };

/** Monotonic time (performance.now(), ms): for measuring spans a wall-clock step must not bend. Not an epoch time. */
export const monotonicClock: Clock = { now: () => performance.now() };

/** A Scheduler on setTimeout. */
export const timerScheduler: Scheduler = {
  schedule(delayMs, fn) {
    const timer = setTimeout(fn, Math.max(0, delayMs));
    return () => clearTimeout(timer);
  },
};
