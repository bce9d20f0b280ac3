import { randomUUID } from 'node:crypto';
import { hasLimits, rateLimitHeaders, type AdmitResult, type Limiter, type Ticket } from '@llmgw/limits';
import type { RouterErrorKind } from '../api/openai-error.mapper';
import type { RouterKey } from '../auth/api-key.authenticator';
import type { TokenUsage } from './response-usage';

/** A request's claim on its key's limits, and the headers its answer carries. */
export interface KeyAdmission {
  readonly ticket: Ticket;
  readonly headers: Record<string, string>;
}

/** Why a request was refused by its key's limits: the answer's kind, message and headers. */
export interface KeyRefusal {
  readonly kind: RouterErrorKind;
  readonly message: string;
  readonly headers: Record<string, string>;
}

const MAX_TOKENS = /"max(?:_completion)?_tokens"\s*:\s*(\d{1,12})/g;

/** Body bytes per prompt token in the reservation's estimate of the prompt (OpenAI's rule of thumb: ~4 characters a token). */
export const BYTES_PER_PROMPT_TOKEN = 4;

/**
 * The tokens a request reserves at admission: what it may generate, its `max_tokens` (or
 * `max_completion_tokens`, the largest given), else `estimate`, plus an estimate of its prompt,
 * one token per {@link BYTES_PER_PROMPT_TOKEN} bytes of the body, since the engine counts the
 * prompt in the usage the reservation is settled to. Read without parsing the body (the scanner
 * already checked it); a value nested deeper than the top level can only make it larger.
 */
export function tokensToReserve(body: Buffer, estimate: number): number {
  const text = body.toString('latin1');
  let most: number | undefined;
  for (const m of text.matchAll(MAX_TOKENS)) most = Math.max(most ?? 0, Number(m[1]));
  return (most ?? estimate) + Math.ceil(body.length / BYTES_PER_PROMPT_TOKEN);
}

/**
 * The router's stage for a key's limits: admits a request against them (exact across routers in
 * Redis, this router's share without it: SharedLimiter), answers a refusal as OpenAI does (429
 * `rate_limit_exceeded`, or `insufficient_quota` for the daily budget, with Retry-After and the
 * x-ratelimit-* headers), and settles the claim with the tokens the answer says it used.
 */
export class KeyLimitsStage {
  /** Admitted requests not settled yet: their concurrency claims are renewed while they run. */
  private readonly open = new Set<KeyAdmission>();

  constructor(
    private readonly limiter: Limiter,
    private readonly tokenEstimate: number,
  ) {}

  /** Whether the key has any limit to ask about. */
  needs(key: RouterKey | undefined): key is RouterKey {
    return key !== undefined && hasLimits(key.limits);
  }

  /**
   * The key's limits' decision on a request: at once where the limiter has it at hand (a permit
   * of a batch this router holds, the in-memory limiter), else a promise of it (Redis asked). The
   * hot path goes on in the same turn when it can: a busy key's requests wait on nothing.
   */
  admit(key: RouterKey, body: Buffer): KeyAdmission | KeyRefusal | Promise<KeyAdmission | KeyRefusal> {
    const tokens = key.limits.tokensPerMinute !== undefined || key.limits.tokensPerDay !== undefined;
    const reserveTokens = tokens ? tokensToReserve(body, this.tokenEstimate) : 0;
    const request = { key: key.name, limits: key.limits, requestId: randomUUID(), reserveTokens };
    const now = this.limiter.admitNow?.(request);
    if (now !== undefined) return this.decided(now, reserveTokens);
    return this.limiter.admit(request).then((result) => this.decided(result, reserveTokens));
  }

  private decided(result: AdmitResult, reserveTokens: number): KeyAdmission | KeyRefusal {
    const headers = rateLimitHeaders(result);
    if (result.admitted && result.ticket !== undefined) {
      const admission = { ticket: result.ticket, headers };
      this.open.add(admission);
      return admission;
    }
    return refusal(result, headers, reserveTokens);
  }

  /** The request ended: its claim becomes what `usage` says it used (nothing when it failed before the engine counted). */
  settle(admission: KeyAdmission, usage: TokenUsage | undefined, succeeded: boolean): Promise<void> | undefined {
    this.open.delete(admission);
    const used = usage !== undefined ? usage.promptTokens + usage.completionTokens : succeeded ? admission.ticket.reserved : 0;
    return this.limiter.settle(admission.ticket, used);
  }

  /** Extends the concurrency claims of every request still in flight (call it well within the lease). */
  renewOpen(): Promise<void> {
    return this.limiter.renew([...this.open].map((a) => a.ticket));
  }
}

function refusal(result: AdmitResult, headers: Record<string, string>, reserved: number): KeyRefusal {
  const retry = Math.max(1, Math.ceil((result.retryAfterMs ?? 1_000) / 1_000));
  const all = { ...headers, 'retry-after': String(retry) };
  switch (result.refusedBy) {
    case 'daily-tokens':
      return { kind: 'insufficient_quota', message: "This API key has used its tokens for today (UTC); it gets more at midnight UTC.", headers: all };
    case 'tokens':
      return {
        kind: 'rate_limit_exceeded',
        message: `Rate limit reached for tokens per minute on this API key: this request reserves ${reserved} tokens (its max_tokens and an estimate of its prompt); try again in ${retry} s.`,
        headers: all,
      };
    case 'concurrency':
      return { kind: 'rate_limit_exceeded', message: 'Too many requests in flight on this API key; try again when one finishes.', headers: all };
    default:
      return { kind: 'rate_limit_exceeded', message: `Rate limit reached for requests per minute on this API key; try again in ${retry} s.`, headers: all };
  }
}
