import type { Clock, NodeState } from '@llmgw/domain';
import type { ReplicaRepository } from '@llmgw/store';
import type { Logger } from 'pino';
import type { CatalogReloader } from '../catalog/catalog.reloader';
import type { ControllerTiming } from '../config/controller.config';
import type { LeadershipService } from '../leadership/leadership.service';
import type { TermService } from '../leadership/term.service';
import type { NodeRegistry } from '../nodes/node.registry';
import type { EndpointPublisher } from '../publishing/endpoint.publisher';
import type { KeySetReader } from '../publishing/key-set.reader';
import type { Reconciler } from '../reconcile/replica.reconciler';
import type { RecordEvent } from '../store/event.recorder';
import type { StatePersister } from '../store/state.persister';
import type { UsageTracker } from '../usage/usage.tracker';

/** The leader reads the usage every controller stored once this many ticks (5 s at the default 1 s tick). */
const USAGE_READ_EVERY_TICKS = 5;

/** What the tick drives (narrow ports; the loop owns none of them). */
export interface TickDeps {
  readonly clock: Clock;
  readonly timing: ControllerTiming;
  readonly leadership: Pick<LeadershipService, 'isLeader'>;
  readonly term: Pick<TermService, 'phase' | 'leads' | 'checkSettled' | 'refreshStandby'>;
  readonly nodes: Pick<NodeRegistry, 'checkHealth'>;
  readonly catalog: Pick<CatalogReloader, 'poll'>;
  readonly keys: Pick<KeySetReader, 'poll'>;
  readonly usage: Pick<UsageTracker, 'merge'>;
  readonly store: { readonly replicas: Pick<ReplicaRepository, 'listUsage'> };
  readonly reconciler: Pick<Reconciler, 'pass'>;
  readonly persister: Pick<StatePersister, 'flush'>;
  readonly publisher: Pick<EndpointPublisher, 'refresh'>;
  readonly recordEvent: RecordEvent;
}

/**
 * The controller's clock work: every tick (LLMGW_CONTROLLER_TICK) node health, the settle check,
 * a standby's store read, catalog and key polls, usage merge, a reconcile pass, the store flush
 * and a publish; and between ticks, reconcile passes asked for by events (coalesced, active
 * leaders only). Ticks never overlap.
 */
export class TickLoop {
  private tickTimer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private passTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private ticks = 0;
  private readonly log: Logger;

  constructor(
    private readonly deps: TickDeps,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'ControlPlane' });
  }

  /** Ticks every `timing.tickMs` from now on (the timer does not hold the process open). */
  start(): void {
    this.tickTimer = setInterval(() => void this.tick(), this.deps.timing.tickMs);
    this.tickTimer.unref();
  }

  /** No more ticks or passes; resolves once a tick in progress is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.tickTimer);
    clearTimeout(this.passTimer);
    await this.ticking;
  }

  /** One tick: health, catalog, reconcile, store sync, publish. Ticks never overlap. */
  tick(): Promise<void> {
    this.ticking ??= this.runTick().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  /** A reconcile pass soon (coalesced), when leading and settled. */
  requestPass(): void {
    if (this.passTimer || this.deps.term.phase !== 'active' || this.stopped) return;
    this.passTimer = setTimeout(() => {
      this.passTimer = undefined;
      void this.deps.reconciler.pass();
    }, 10);
    this.passTimer.unref();
  }

  private async runTick(): Promise<void> {
    if (this.stopped) return;
    const { leadership, term, clock } = this.deps;
    const leader = leadership.isLeader();
    try {
      if (leader && (term.phase === 'settling' || term.phase === 'active')) {
        for (const t of this.deps.nodes.checkHealth(clock.now(), this.deps.timing)) this.healthChanged(t.nodeId, t.from, t.to);
        term.checkSettled();
      } else if (!leader) {
        await term.refreshStandby();
      }
      await this.deps.catalog.poll();
      // Keys created or revoked through the catalog API reach routers with the next snapshot. A
      // standby reads them too: a controller that led before would otherwise take the lead again
      // with the set it last read then, and its first snapshot would bring back a revoked key.
      await this.deps.keys.poll();
      // Routers that reach a standby report their use to it, and it writes that to the store:
      // the leader reads it back now and then, so idleness is judged on every router's reports.
      if (leader && term.phase === 'active' && ++this.ticks % USAGE_READ_EVERY_TICKS === 0) {
        this.deps.usage.merge(await this.deps.store.replicas.listUsage());
      }
    } catch (error) {
      this.log.warn({ err: error }, 'tick: store read failed');
    }
    if (leader) await this.deps.reconciler.pass();
    // Asked now, not at the tick's start: the lead may have been lost during the awaits above.
    const leads = term.leads();
    await this.deps.persister.flush({ nodes: leads, replicas: leads });
    this.deps.publisher.refresh();
  }

  private healthChanged(nodeId: string, from: NodeState, to: NodeState): void {
    if (to === 'lost') {
      this.log.warn({ nodeId, from }, 'node lost: its replicas count as gone');
      this.deps.recordEvent({ kind: 'lost', nodeId, reason: `no heartbeat for ${this.deps.timing.lostAfterMs} ms` });
    } else if (to === 'unreachable') {
      this.log.warn({ nodeId }, 'node unreachable: no new placements, its endpoints suspect');
    }
  }
}
