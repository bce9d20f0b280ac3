import { describe } from './spec-values';

const UNIT_MS: Readonly<Record<string, number>> = Object.freeze({ ms: 1, s: 1_000, m: 60_000, h: 3_600_000 });
const TIMEOUT_RE = /^(\d+)(ms|s|m|h)$/;

/** Shortest and longest per-model deadline a catalog may set, milliseconds. */
export const TIMEOUT_MIN_MS = 100;
export const TIMEOUT_MAX_MS = 3_600_000;

export type TimeoutResult = { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly message: string };

/**
 * Reads a deadline written as a whole number with a unit: `500ms`, `30s`, `5m`, `1h` (a bare
 * number is refused: its unit would be a guess). Between 100 ms and 1 h.
 */
export function parseTimeout(value: unknown): TimeoutResult {
  const m = typeof value === 'string' ? TIMEOUT_RE.exec(value) : null;
  if (m === null) return { ok: false, message: `must be a duration such as "500ms", "30s", "5m" or "1h" (got ${describe(value)})` };
  const ms = Number(m[1]) * UNIT_MS[m[2]];
  if (!Number.isSafeInteger(ms) || ms < TIMEOUT_MIN_MS || ms > TIMEOUT_MAX_MS) {
    return { ok: false, message: `must be between ${TIMEOUT_MIN_MS}ms and 1h (got ${describe(value)})` };
  }
  return { ok: true, ms };
}
