import type { UsageReceiver } from '../grpc/router.calls';
import type { ReplicaRegistry } from '../replicas/replica.registry';

/**
 * Routers' last-used reports merged per replica: the newest time wins, an older report never
 * moves a replica back, and a replica nobody reported keeps `lastUsedAt` absent (unknown, never
 * idle). Reports for replicas this controller tracks update them at once; every report is also
 * queued for the store (`takePending`), which applies the same newest-wins rule, so a standby's
 * reports reach the leader's records too.
 */
export class UsageTracker implements UsageReceiver {
  private pending = new Map<string, number>();

  constructor(private readonly replicas: ReplicaRegistry) {}

  report(_routerId: string, lastUsed: ReadonlyMap<string, number>): void {
    for (const [id, at] of lastUsed) {
      if (!Number.isFinite(at) || at <= 0) continue;
      const queued = this.pending.get(id);
      if (queued === undefined || queued < at) this.pending.set(id, at);
      this.advance(id, at);
    }
  }

  /**
   * Last-used times read back from the store, where every controller writes what its routers
   * report: how the leader learns of use reported to a standby. Newest wins; nothing is queued
   * for writing again.
   */
  merge(stored: ReadonlyMap<string, number>): void {
    for (const [id, at] of stored) this.advance(id, at);
  }

  private advance(id: string, at: number): void {
    this.replicas.update(id, (entry) => {
      const known = entry.replica.lastUsedAt;
      if (known !== undefined && known >= at) return entry;
      return { ...entry, replica: { ...entry.replica, lastUsedAt: at } };
    });
  }

  /** Reports not yet written to the store (and forgets them). */
  takePending(): Map<string, number> {
    const out = this.pending;
    this.pending = new Map();
    return out;
  }

  /** Puts reports back after a failed write; newer ones that arrived meanwhile win. */
  requeue(usage: ReadonlyMap<string, number>): void {
    for (const [id, at] of usage) {
      const queued = this.pending.get(id);
      if (queued === undefined || queued < at) this.pending.set(id, at);
    }
  }
}
