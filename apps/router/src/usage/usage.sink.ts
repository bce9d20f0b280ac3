/**
 * Where the router sends which replicas it used and when — the direction opposite to the
 * endpoint snapshots. Implemented over gRPC (`RouterService.ReportUsage`) or in process; the
 * router does not care which.
 */
export interface UsageSink {
  /** Replica id → last time used, ms since the epoch. Replicas not used since start are absent. */
  report(lastUsed: ReadonlyMap<string, number>): Promise<void>;
}
