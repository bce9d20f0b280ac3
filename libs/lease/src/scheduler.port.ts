/** Runs callbacks later. Injected so tests drive time by hand; apps use {@link timerScheduler}. */
export interface Scheduler {
  /** Calls `fn` once after about `delayMs` ms; the returned function cancels it if not yet run. */
  schedule(delayMs: number, fn: () => void): () => void;
}
