import type { KeyUsageCount } from './key-usage.tally';

/**
 * Where the router sends which replicas it used and when — the direction opposite to the
 * endpoint snapshots. Implemented over gRPC (`RouterService.ReportUsage`) or in process; the
 * router does not care which.
 */
export interface UsageSink {
  /**
   * Replica id → last time used, ms since the epoch (replicas not used since start are absent),
   * and what keyed requests used since the last accepted report.
   */
  report(lastUsed: ReadonlyMap<string, number>, keyUsage?: readonly KeyUsageCount[]): Promise<void>;
}
