/**
 * How an endpoint's recent scrapes judge it, from the count of consecutive failed scrapes
 * (connection refused or no answer in time):
 * - `ok`: the newest scrape answered, or none has failed yet (never scraped is not failing);
 * - `suspect`: at least one failure, fewer than the unavailable threshold — scored down;
 * - `unavailable`: the threshold reached — filtered out while another endpoint is left.
 * A scrape that answers again brings the endpoint back to `ok` at once.
 */
export type ScrapeHealth = 'ok' | 'suspect' | 'unavailable';

export interface ScrapeHealthOptions {
  /** Consecutive failed scrapes that make an endpoint unavailable; at least 1. */
  readonly unavailableAfter: number;
}

/** The health that `consecutiveFailures` (a count ≥ 0) of failed scrapes in a row gives. */
export function scrapeHealth(consecutiveFailures: number, options: ScrapeHealthOptions): ScrapeHealth {
  if (!(consecutiveFailures > 0)) return 'ok';
  return consecutiveFailures >= options.unavailableAfter ? 'unavailable' : 'suspect';
}
