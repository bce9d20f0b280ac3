import { DomainError, ErrorCode, type Problem } from '@llmgw/domain';
import type { Candidate } from './candidate';

/**
 * When an endpoint counts as saturated. Engine metrics are used only when known; the local
 * in-flight bound always applies, so an endpoint with no fresh scrape is still judged.
 */
export interface SaturationThresholds {
  /** Engine waiting queue at or above which the endpoint is saturated. */
  readonly maxWaiting: number;
  /** KV-cache use (fraction 0..1) at or above which the endpoint is saturated. */
  readonly maxKvUsage: number;
  /** Requests this router has in flight on one endpoint at or above which it is saturated. */
  readonly maxInFlight: number;
}

/** Validates thresholds, listing every bad one by path (`admission.<field>`). */
export function validateThresholds(t: SaturationThresholds): SaturationThresholds {
  const problems: Problem[] = [];
  const check = (name: keyof SaturationThresholds, ok: boolean, want: string): void => {
    if (!ok) problems.push({ path: `admission.${name}`, message: `${want}, got ${JSON.stringify(t[name])}` });
  };
  check('maxWaiting', Number.isInteger(t.maxWaiting) && t.maxWaiting >= 1, 'must be an integer ≥ 1');
  check('maxKvUsage', typeof t.maxKvUsage === 'number' && t.maxKvUsage > 0 && t.maxKvUsage <= 1, 'must be in (0, 1]');
  check('maxInFlight', Number.isInteger(t.maxInFlight) && t.maxInFlight >= 1, 'must be an integer ≥ 1');
  if (problems.length) throw new DomainError(ErrorCode.InvalidArgument, 'invalid admission thresholds', problems);
  return t;
}

export function isSaturated(c: Candidate, t: SaturationThresholds): boolean {
  if (c.inFlight >= t.maxInFlight) return true;
  if (c.load?.waiting !== undefined && c.load.waiting >= t.maxWaiting) return true;
  if (c.load?.kvUsage !== undefined && c.load.kvUsage >= t.maxKvUsage) return true;
  return false;
}

/** What to do with a request now. */
export type AdmissionDecision =
  | { readonly action: 'route'; readonly candidates: readonly Candidate[] }
  | { readonly action: 'queue' }
  | { readonly action: 'reject'; readonly status: 429 | 503; readonly reason: 'queue-full' | 'no-endpoints' };

/**
 * Decides for one request given the eligible endpoints and the model's queue depth:
 * unsaturated endpoints → route among them; all saturated → queue while below the bound,
 * else 429; no endpoint at all → 503.
 */
export function admit(eligible: readonly Candidate[], t: SaturationThresholds, queued: number, queueBound: number): AdmissionDecision {
  if (eligible.length === 0) return { action: 'reject', status: 503, reason: 'no-endpoints' };
  const open = eligible.filter((c) => !isSaturated(c, t));
  if (open.length > 0) return { action: 'route', candidates: open };
  if (queued < queueBound) return { action: 'queue' };
  return { action: 'reject', status: 429, reason: 'queue-full' };
}

/**
 * Seconds a client should wait before retrying: the time the model's endpoints need to drain
 * the requests ahead of it at their measured rate (completions/s), within [min, max]. With no
 * measured rate the answer is `max`: unknown throughput is not fast throughput.
 */
export function retryAfterSeconds(ahead: number, drainRatePerSec: number | undefined, min = 1, max = 60): number {
  if (drainRatePerSec === undefined || !(drainRatePerSec > 0)) return max;
  return Math.min(max, Math.max(min, Math.ceil((ahead + 1) / drainRatePerSec)));
}
