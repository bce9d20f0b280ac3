import type { ChoiceReason } from '../admission/endpoint.lease';

/** Proxy settings; sizes in bytes, times in milliseconds. */
export interface ProxyOptions {
  /** Largest request body accepted; larger → 413. */
  readonly maxBodyBytes: number;
  /** Deepest nesting of objects and arrays accepted in a JSON body; deeper → 400. */
  readonly maxJsonDepth: number;
  /** Extra attempts on other endpoints after a failure before the first response byte. */
  readonly maxRetries: number;
  /** Longest a new TCP connection to an engine may take. */
  readonly connectTimeoutMs: number;
  /** Longest wait for an engine's response headers once the request is sent; a model's `firstByteTimeoutMs` overrides it. */
  readonly firstByteTimeoutMs: number;
  /** Longest silence from an engine in the middle of a response (the stall deadline); a model's `stallTimeoutMs` overrides it. */
  readonly idleTimeoutMs: number;
  /**
   * How long a 200 SSE response's head and role-only chunks are held back waiting for the first
   * content, so that an engine dying in between is retried like any failure before the first
   * byte; past it they are sent anyway. 0 = never hold.
   */
  readonly holdUntilContentMs: number;
  /** Adds `x-llmgw-route` to proxied responses: the chosen replica and why (see routeHeader). Off by default. */
  readonly debugHeader?: boolean;
  /** Counts requests and tokens per API key too (`llmgw_router_key_*`). Off by default: one series per key and model. */
  readonly keyMetrics?: boolean;
}

/** The debug header's name. */
export const ROUTE_HEADER = 'x-llmgw-route';

/**
 * The debug header's value: `replica=<id>; policy=<policy>` and, for prefix affinity, the
 * replica's rank in the prefix's rendezvous order (0 = home), the key's depth in blocks, the
 * load cap and the replicas the guard passed over (`busier=` names the first under both caps,
 * passed over for having more of this router's requests awaiting output than the one chosen or,
 * for a cold key, by load; `cold=true` when the router had not placed the key lately and chose by
 * load); `fallback=` when a prefix-affinity request
 * was chosen by load; `retry=<n>` when it is a retry's replica.
 */
export function routeHeader(replicaId: string, reason: ChoiceReason, retries: number): string {
  let v = `replica=${replicaId}; policy=${reason.policy}`;
  if (reason.policy === 'prefix-affinity') {
    v += `; rank=${reason.rank}; blocks=${reason.blocks}; cap=${reason.cap}; average-cap=${Math.round(reason.averageCap * 100) / 100}`;
    if (reason.deflectedFrom.length > 0) v += `; deflected=${reason.deflectedFrom.join(',')}`;
    if (reason.busier !== undefined) v += `; busier=${reason.busier}`;
    if (reason.cold === true) v += '; cold=true';
  } else if ('fallback' in reason) {
    v += `; fallback=${reason.fallback}`;
  }
  return retries > 0 ? `${v}; retry=${retries}` : v;
}
