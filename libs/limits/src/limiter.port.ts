import type { KeyLimits } from '@llmgw/domain';

/** The window of the per-minute limits. */
export const MINUTE_MS = 60_000;

/** What a router asks before it sends a request of `key` on. */
export interface AdmitRequest {
  /** The key's stable name (never its secret). */
  readonly key: string;
  readonly limits: KeyLimits;
  /** Unique per request: the entry the windows and the concurrency lease hold for it. */
  readonly requestId: string;
  /** Tokens the request may use (prompt + completion: the router reserves max_tokens or its estimate, plus an estimate of the prompt), reserved at admission. */
  readonly reserveTokens: number;
  /** How many routers share the key's limits (the controller's count; default 1): a batch of permits leaves room for one like it for each. */
  readonly routers?: number;
}

/** Which limit refused a request. `daily-tokens` is a budget (OpenAI's insufficient_quota); the rest are rates. */
export type LimitName = 'requests' | 'tokens' | 'concurrency' | 'daily-tokens';

/** The state of one rate after a decision, for OpenAI's x-ratelimit-* headers. */
export interface RateState {
  readonly limit: number;
  readonly remaining: number;
  /** Until the next unit of this rate frees up (ms); 0 when nothing is held. */
  readonly resetMs: number;
}

/** An admitted request's claim, handed back to `settle` when it ends. */
export interface Ticket {
  readonly key: string;
  readonly requestId: string;
  readonly limits: KeyLimits;
  readonly reserved: number;
  /** The UTC day (`YYYY-MM-DD`) its daily tokens were reserved on. */
  readonly day: string;
  /** Which store holds the claim: settle goes to the same one. */
  readonly via: 'redis' | 'memory';
  /** The batch of permits (taken ahead of use, see RedisLimiter) it was admitted from, if any. */
  readonly batch?: string;
  /** The concurrency entry it holds when that is its batch's, not its own id. */
  readonly slot?: string;
}

export interface AdmitResult {
  readonly admitted: boolean;
  readonly refusedBy?: LimitName;
  /** On refusal: when the same request could pass (ms). */
  readonly retryAfterMs?: number;
  /** Absent when the key has no such limit. */
  readonly requests?: RateState;
  readonly tokens?: RateState;
  /** Present exactly when admitted. */
  readonly ticket?: Ticket;
}

/** Admits requests against their key's limits and settles them when they end. */
export interface Limiter {
  admit(request: AdmitRequest): Promise<AdmitResult>;
  /**
   * The decision now, when it needs no store's answer (a permit of a batch this router holds, an
   * in-memory limiter); undefined otherwise, and then nothing was taken: ask `admit`. Where it
   * answers it is the same decision `admit` would give, without the promise and its turns on the
   * hot path.
   */
  admitNow?(request: AdmitRequest): AdmitResult | undefined;
  /**
   * The request ended having used `usedTokens` (prompt + completion; 0 when it failed before the
   * engine counted any): its reservation becomes what it used, and its concurrency lease ends.
   * Undefined when that is done at once (nothing for a store to do: the hot path allocates no
   * promise), else a promise of the store's write.
   */
  settle(ticket: Ticket, usedTokens: number): Promise<void> | undefined;
  /** Extends the concurrency leases of requests still in flight (a stream longer than the lease). */
  renew(tickets: readonly Ticket[]): Promise<void>;
  /** Gives back what it holds ahead of use (a router shutting down). */
  close?(): Promise<void>;
}

/** True when the key has any limit at all; a key without limits needs no admission. */
export function hasLimits(limits: KeyLimits): boolean {
  return (
    limits.requestsPerMinute !== undefined || limits.tokensPerMinute !== undefined || limits.concurrentRequests !== undefined || limits.tokensPerDay !== undefined
  );
}

const DAY_MS = 86_400_000;
/** The last day utcDay named: every admission asks, and a day is long. */
let lastDay = { start: 0, name: '1970-01-01' };

/** The UTC day of `ms`, as the daily budget's key. */
export function utcDay(ms: number): string {
  if (ms >= lastDay.start && ms < lastDay.start + DAY_MS) return lastDay.name;
  const start = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
  const name = new Date(start).toISOString().slice(0, 10);
  lastDay = { start, name };
  return name;
}

/** Milliseconds from `ms` to the next UTC midnight, when the daily budget starts over. */
export function msToNextUtcDay(ms: number): number {
  return DAY_MS - (ms % DAY_MS);
}

/**
 * Each limit split over `routers` (at least 1 each): what one router enforces alone while the
 * shared store is unreachable, so the fleet together stays at the limit, never unlimited.
 */
export function shareOf(limits: KeyLimits, routers: number): KeyLimits {
  const n = Math.max(1, Math.floor(routers));
  const part = (v: number | undefined): number | undefined => (v === undefined ? undefined : Math.max(1, Math.floor(v / n)));
  return {
    ...(limits.requestsPerMinute !== undefined && { requestsPerMinute: part(limits.requestsPerMinute) }),
    ...(limits.tokensPerMinute !== undefined && { tokensPerMinute: part(limits.tokensPerMinute) }),
    ...(limits.concurrentRequests !== undefined && { concurrentRequests: part(limits.concurrentRequests) }),
    ...(limits.tokensPerDay !== undefined && { tokensPerDay: part(limits.tokensPerDay) }),
  };
}

/** A duration the way OpenAI's x-ratelimit-reset-* headers write it: `20ms`, `1s`, `6m0s`, `1h2m3s`. */
export function formatReset(ms: number): string {
  const t = Math.max(0, Math.ceil(ms));
  if (t < 1_000) return `${t}ms`;
  const totalSeconds = Math.ceil(t / 1_000);
  const h = Math.floor(totalSeconds / 3_600);
  const m = Math.floor((totalSeconds % 3_600) / 60);
  const s = totalSeconds % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/** OpenAI's rate-limit headers for a decision: the `-requests` and `-tokens` triples where those limits exist. */
export function rateLimitHeaders(result: AdmitResult): Record<string, string> {
  const headers: Record<string, string> = {};
  const { requests, tokens } = result;
  if (requests !== undefined) {
    headers['x-ratelimit-limit-requests'] = String(requests.limit);
    headers['x-ratelimit-remaining-requests'] = String(Math.max(0, requests.remaining));
    headers['x-ratelimit-reset-requests'] = formatReset(requests.resetMs);
  }
  if (tokens !== undefined) {
    headers['x-ratelimit-limit-tokens'] = String(tokens.limit);
    headers['x-ratelimit-remaining-tokens'] = String(Math.max(0, tokens.remaining));
    headers['x-ratelimit-reset-tokens'] = formatReset(tokens.resetMs);
  }
  return headers;
}
