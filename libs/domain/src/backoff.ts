/** Retry delays, ms: the first retry waits `minMs`, each later one twice the previous, never more than `maxMs`. */
export interface BackoffBounds {
  readonly minMs: number;
  readonly maxMs: number;
}

/**
 * Delay before retry number `attempt` (1 = the first retry): `minMs`, doubling per attempt,
 * capped at `maxMs`. An attempt below 1 counts as 1. The one exponential backoff of llmgw: the
 * controller's replica retries, the agent's engine restarts and the reconnects of agents and
 * routers (which add jitter on top) all step by it.
 */
export function backoffDelay(attempt: number, bounds: BackoffBounds): number {
  const n = Math.max(1, Math.floor(attempt));
  // 2^30 × any sane minimum is past every maximum; stop doubling before it overflows.
  const factor = 2 ** Math.min(n - 1, 30);
  return Math.min(bounds.maxMs, bounds.minMs * factor);
}
