import { DomainError, ErrorCode } from '@llmgw/domain';
import type { Fence } from '@llmgw/lease';
import type { NodeRepository, ReplicaRepository } from '@llmgw/store';
import type { Logger } from 'pino';
import { nodeRecordOf, type NodeRegistry } from '../nodes/node.registry';
import type { ReplicaRegistry } from '../replicas/replica.registry';
import type { UsageTracker } from '../usage/usage.tracker';

/** The store methods the persister writes through (narrow ports, CONVENTIONS 4). */
export interface PersisterStore {
  readonly nodes: Pick<NodeRepository, 'upsert'>;
  readonly replicas: Pick<ReplicaRepository, 'place' | 'update' | 'recordUsage'>;
}

/**
 * Writes what changed in memory to the store: node facts (unfenced: they are the agents'
 * reports; each is written only while `fence()` still answers, so a leader deposed mid-flush
 * stops writing and leaves the rest queued), replica records (fenced: only the leader's writes
 * land), and router usage. A failed
 * write leaves the change queued for the next flush, so a store outage loses nothing and stops
 * nothing; flushes never overlap.
 */
export class StatePersister {
  private running: Promise<void> | undefined;
  private readonly log: Logger;

  constructor(
    private readonly store: PersisterStore,
    private readonly nodes: NodeRegistry,
    private readonly replicas: ReplicaRegistry,
    private readonly usage: UsageTracker,
    private readonly fence: () => Fence,
    logger: Logger,
    /** Nodes whose record is being removed (`nodes forget`): never written meanwhile. */
    private readonly removing: (nodeId: string) => boolean = () => false,
  ) {
    this.log = logger.child({ context: 'StatePersister' });
  }

  /** Resolves when no flush is running (one that started earlier may still write any node). */
  async idle(): Promise<void> {
    await this.running;
  }

  /** One flush (or the one already running). Never rejects. `replicas: false` = a standby's flush (usage only). */
  flush(options: { nodes: boolean; replicas: boolean } = { nodes: true, replicas: true }): Promise<void> {
    this.running ??= this.run(options).finally(() => (this.running = undefined));
    return this.running;
  }

  private async run(options: { nodes: boolean; replicas: boolean }): Promise<void> {
    if (options.nodes) await this.flushNodes();
    if (options.replicas) await this.flushReplicas();
    await this.flushUsage();
  }

  private async flushNodes(): Promise<void> {
    const ids = this.nodes.takeDirty();
    for (let i = 0; i < ids.length; i++) {
      const entry = this.nodes.get(ids[i]);
      if (!entry) continue;
      if (!this.leading()) {
        this.nodes.markDirty(ids.slice(i));
        return;
      }
      if (this.removing(ids[i])) {
        // Kept for a later flush, in case the removal fails and the node stays.
        this.nodes.markDirty([ids[i]]);
        continue;
      }
      try {
        await this.store.nodes.upsert(nodeRecordOf(entry));
      } catch (error) {
        this.nodes.markDirty(ids.slice(i));
        this.log.warn({ err: error, nodeId: ids[i] }, 'store: node write failed; will retry');
        return;
      }
    }
  }

  /** Whether this controller still leads (its fence answers). */
  private leading(): boolean {
    try {
      this.fence();
      return true;
    } catch {
      return false;
    }
  }

  private async flushReplicas(): Promise<void> {
    const dirty = [...this.replicas.values()].filter((e) => e.dirty || !e.persisted);
    for (const entry of dirty) {
      let fence: Fence;
      try {
        fence = this.fence();
      } catch {
        return; // not leading: nothing of ours may be written
      }
      const r = entry.replica;
      try {
        if (!entry.persisted) {
          try {
            await this.store.replicas.place(r, fence);
          } catch (error) {
            if (!(error instanceof DomainError && error.code === ErrorCode.Conflict)) throw error;
            await this.store.replicas.update(r.id, { state: r.state, reason: r.reason ?? null, restarts: r.restarts, members: r.members, updatedAt: r.updatedAt }, fence);
          }
        } else {
          await this.store.replicas.update(r.id, { state: r.state, reason: r.reason ?? null, restarts: r.restarts, members: r.members, updatedAt: r.updatedAt }, fence);
        }
      } catch (error) {
        if (error instanceof DomainError && error.code === ErrorCode.NotFound) {
          // The row went away (evicted concurrently): write it again next flush as new.
          this.replicas.update(r.id, (e) => ({ ...e, persisted: false }));
          continue;
        }
        this.log.warn({ err: error, replicaId: r.id }, 'store: replica write failed; will retry');
        return;
      }
      // Clean only if nothing changed while the write was in flight.
      this.replicas.update(r.id, (e) => (e.replica === r ? { ...e, dirty: false, persisted: true } : { ...e, persisted: true }));
    }
  }

  private async flushUsage(): Promise<void> {
    const usage = this.usage.takePending();
    if (usage.size === 0) return;
    try {
      await this.store.replicas.recordUsage(usage);
    } catch (error) {
      this.usage.requeue(usage);
      this.log.warn({ err: error, replicas: usage.size }, 'store: usage write failed; will retry');
    }
  }
}
