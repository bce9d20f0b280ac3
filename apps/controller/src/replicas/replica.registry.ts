import type { Replica } from '@llmgw/domain';
import { foldMemberReport, type MemberReport, type ReplicaEntry } from '@llmgw/control';

/** What changed, for listeners (publishing, reconciling). */
export type ReplicaChange =
  | { readonly kind: 'added' | 'updated' | 'removed'; readonly replicaId: string }
  | { readonly kind: 'reset' };

/**
 * The replicas the leader placed or adopted. Synchronous and single-writer: every change
 * replaces a whole entry, so `snapshot()` hands out values that never change under the reader —
 * the reconciler decides from a snapshot and re-reads an entry by id after every `await`,
 * because agent reports keep arriving while it waits on the store.
 */
export class ReplicaRegistry {
  private replicas = new Map<string, ReplicaEntry>();
  private listener: ((change: ReplicaChange) => void) | undefined;

  onChange(listener: (change: ReplicaChange) => void): void {
    this.listener = listener;
  }

  /** Every replica by id; a copy whose entries never change. */
  snapshot(): ReadonlyMap<string, ReplicaEntry> {
    return new Map(this.replicas);
  }

  get(id: string): ReplicaEntry | undefined {
    return this.replicas.get(id);
  }

  get size(): number {
    return this.replicas.size;
  }

  values(): IterableIterator<ReplicaEntry> {
    return this.replicas.values();
  }

  /** Replaces everything with the stored replicas (clean, persisted). */
  loadFromStore(replicas: readonly Replica[]): void {
    this.replicas = new Map(replicas.map((replica) => [replica.id, fromStored(replica)]));
    this.emit({ kind: 'reset' });
  }

  /** Adds a replica (placed, or adopted from an agent's report). */
  add(entry: ReplicaEntry): void {
    this.replicas.set(entry.replica.id, entry);
    this.emit({ kind: 'added', replicaId: entry.replica.id });
  }

  /** Replaces an entry through `change`; returns the new one, or undefined when the id is unknown. */
  update(id: string, change: (entry: ReplicaEntry) => ReplicaEntry): ReplicaEntry | undefined {
    const entry = this.replicas.get(id);
    if (!entry) return undefined;
    const next = change(entry);
    if (next === entry) return entry;
    this.replicas.set(id, next);
    this.emit({ kind: 'updated', replicaId: id });
    return next;
  }

  /** Folds one member's report into the replica (see foldMemberReport); unknown ids are ignored. */
  report(replicaId: string, report: MemberReport, now: number): ReplicaEntry | undefined {
    return this.update(replicaId, (entry) => foldMemberReport(entry, report, now));
  }

  remove(id: string): boolean {
    const existed = this.replicas.delete(id);
    if (existed) this.emit({ kind: 'removed', replicaId: id });
    return existed;
  }

  private emit(change: ReplicaChange): void {
    this.listener?.(change);
  }
}

/** A stored replica as a clean entry. */
export function fromStored(replica: Replica): ReplicaEntry {
  return { replica, memberStates: {}, persisted: true, dirty: false, fetching: [] };
}
