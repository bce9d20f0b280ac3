import type { Rng } from '@llmgw/domain';

/** Bounds of the reconnect delay, ms. */
export interface BackoffBounds {
  readonly minMs: number;
  readonly maxMs: number;
}

/**
 * Delay before reconnect attempt `failures` (1 = after the first failure): exponential from
 * `minMs`, capped at `maxMs`, with "equal jitter" — uniformly in [half, all] of that step — so a
 * fleet that lost its controller at the same moment does not come back in lock step, while no
 * delay is ever shorter than half its step.
 */
export function reconnectDelay(failures: number, bounds: BackoffBounds, rng: Rng): number {
  const n = Math.max(1, Math.floor(failures));
  const step = Math.min(bounds.maxMs, bounds.minMs * 2 ** Math.min(n - 1, 30));
  return Math.round(step / 2 + (rng.next() * step) / 2);
}
