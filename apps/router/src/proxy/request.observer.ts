import type { TokenUsage } from '../tenancy/response-usage';

/** Why an attempt at an engine failed (metric label values). */
export type UpstreamFailure = 'connect' | 'reset' | 'timeout' | 'status_5xx' | 'stream_cut';

/**
 * What the request path tells the world about each request, in the path's own words: the one
 * object the proxy notifies. RouterMetrics implements it with Prometheus series; times are in
 * seconds.
 */
export interface RequestObserver {
  /** A request was refused for its API key (401). */
  authFailed(): void;
  /** A request was answered (or given up on, 499) with `status` after `seconds`. `route`/`model` are '' when not known yet. */
  answered(route: string, model: string, status: number, seconds: number): void;
  /** An answer went out to the client, `bytes` of body. */
  responseBytes(model: string, bytes: number): void;
  /** A keyed request was answered (only when per-key metrics are on). */
  keyAnswered(key: string, model: string, status: number): void;
  /** An answer's tokens, as the engine reported them; `key` when per-key metrics are on. */
  tokensUsed(model: string, usage: TokenUsage, key: string | undefined): void;
  /** A key's limits refused a request. */
  keyLimitRefused(reason: string): void;
  /** The router's own time on a request before it went to an engine, queueing excluded. */
  overhead(seconds: number): void;
  /** An attempt went to endpoint `endpointId`. */
  endpointChosen(model: string, endpointId: string): void;
  /** The first response byte (or an engine's error head) after `seconds`. */
  firstByte(model: string, seconds: number): void;
  /** A request is sent again, on another endpoint. */
  retried(model: string, reason: UpstreamFailure): void;
  /** An attempt at `endpointId` failed (counted before its endpoint is released: releasing a removed endpoint's last request forgets its series). */
  upstreamFailed(endpointId: string, kind: UpstreamFailure): void;
  /** A response that had started was cut. */
  streamCut(model: string): void;
}
