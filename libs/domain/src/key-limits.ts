/**
 * The limits of one API key. Each is optional; an absent one does not limit. They mean the number
 * the operator wrote for the whole router fleet, however many routers serve the key.
 */
export interface KeyLimits {
  /** Requests admitted in any 60 s. */
  readonly requestsPerMinute?: number;
  /** Tokens (prompt + completion) in any 60 s; a request reserves its max_tokens and an estimate of its prompt at admission. */
  readonly tokensPerMinute?: number;
  /** Requests in flight at once. */
  readonly concurrentRequests?: number;
  /** Tokens per UTC day. */
  readonly tokensPerDay?: number;
}

/** The largest value any limit may take: far above any real fleet, well inside exact doubles. */
export const MAX_KEY_LIMIT = 1_000_000_000;

/** An API key as the controller publishes it to routers: the SHA-256 (hex) of its secret, never the secret. */
export interface ManagedKey {
  readonly name: string;
  readonly secretHash: string;
  /** Model names, aliases or `prefix*` patterns it may use; `*` is every model. */
  readonly models: readonly string[];
  readonly limits: KeyLimits;
  /** When it stops being accepted (ms since the epoch); absent: never. */
  readonly expiresAt?: number;
}
