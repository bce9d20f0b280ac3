/** Wall-clock time in milliseconds since the epoch. Pure code takes a Clock instead of calling Date.now(). */
export interface Clock {
  now(): number;
}

/** A source of uniform randomness in [0, 1). Pure code takes an Rng instead of calling Math.random(). */
export interface Rng {
  next(): number;
}

/** Runs callbacks later. Pure code that must wait takes a Scheduler; tests drive time by hand. */
export interface Scheduler {
  /** Calls `fn` once after about `delayMs` ms; the returned function cancels it if not yet run. */
  schedule(delayMs: number, fn: () => void): () => void;
}
