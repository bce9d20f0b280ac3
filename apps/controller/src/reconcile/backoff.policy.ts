/** Retry delays, ms: the first retry waits `minMs`, each later one twice the previous, never more than `maxMs`. */
export interface BackoffWindow {
  readonly backoffMinMs: number;
  readonly backoffMaxMs: number;
}

/** Delay before retry number `attempt` (1 = the first retry). Pure; attempt below 1 counts as 1. */
export function backoffDelay(attempt: number, window: BackoffWindow): number {
  const n = Math.max(1, Math.floor(attempt));
  // 2^30 × any sane minimum is past every maximum; stop doubling before it overflows.
  const factor = 2 ** Math.min(n - 1, 30);
  return Math.min(window.backoffMaxMs, window.backoffMinMs * factor);
}
