import type { Scheduler } from './scheduler.port';

/** A Scheduler on the runtime's timers (setTimeout), for apps and process tests. */
export const timerScheduler: Scheduler = {
  schedule(delayMs, fn) {
    const timer = setTimeout(fn, Math.max(0, delayMs));
    return () => clearTimeout(timer);
  },
};
