import type { EngineLoad } from '@llmgw/domain';
import type { ScrapeHealth } from './scrape-health';

/** Breaker position as the router's circuit breaker reports it. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/**
 * What the picker knows about one endpoint at the moment of a choice. Built by the router from
 * its live endpoint state; the routing lib never mutates it.
 */
export interface Candidate {
  readonly id: string;
  /** Served model names (canonical names, not aliases). */
  readonly models: readonly string[];
  readonly suspect: boolean;
  readonly draining: boolean;
  readonly breaker: BreakerState;
  /** Whether a half-open breaker would admit one more probe right now. */
  readonly probeAvailable: boolean;
  /** Requests this router has sent and not yet seen finish. */
  readonly inFlight: number;
  /**
   * Of those, the ones that have had no response body yet: queued on the engine or in prefill,
   * as far as this router can see (a stream's first chunk comes with its first token). A new
   * request's time to first token waits behind these, not behind the ones already decoding.
   * Absent: every in-flight request is counted (the router did not say).
   */
  readonly awaitingOutput?: number;
  /**
   * The prefix-affinity guard's load on this endpoint (see guardLoad) as this router has seen it
   * over the last seconds: a time-weighted moving average (LoadAverage). Absent: the load now.
   */
  readonly averageLoad?: number;
  /**
   * The engine's load from the newest scrape, or undefined when there is no fresh scrape
   * (failed, stale or not yet taken). Individual fields may also be undefined: unknown.
   */
  readonly load?: EngineLoad;
  /**
   * Requests this router had in flight on the endpoint when `load` was read: the most it had
   * while that scrape was out (the engine read its figures at some moment in between and holds
   * no more of this router's requests than the router had then). With it, the scorers add what
   * this router sent (or saw finish) since that scrape to the scraped figures; without it (or
   * without `load`) they use the scraped figures as they are.
   */
  readonly inFlightAtScrape?: number;
  /** Sequences the engine runs at once, when it reports them (its fresh `load.capacity`; llama.cpp: its slots). */
  readonly maxRunning?: number;
  /** What the endpoint's recent scrapes say of it (see scrapeHealth); absent = no failure recorded (`ok`). */
  readonly scrapeHealth?: ScrapeHealth;
}

/** A request as the picker sees it. */
export interface PickRequest {
  readonly model: string;
}
