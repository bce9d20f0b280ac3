import type { Catalog } from '@llmgw/catalog';
import { DomainError, ErrorCode, type Clock, type Model, type Replica } from '@llmgw/domain';
import type { Fence } from '@llmgw/lease';
import type { EventRepository, ReplicaRepository } from '@llmgw/store';
import type { Logger } from 'pino';
import type { CurrentCatalog } from '../catalog/catalog.reloader';
import type { AgentCommands } from '../nodes/agent-commands.port';
import type { NodeRegistry } from '../nodes/node.registry';
import { awaitsRendezvous, planReconcile, type PlanAction, type PlanTiming, type ReplicaEntry, type UnplaceableState } from '@llmgw/control';
import type { ReplicaRegistry } from '../replicas/replica.registry';
import { eventRecorder, type RecordEvent } from '../store/event.recorder';
import type { ReplicaIds } from './replica-ids';

type PlaceAction = Extract<PlanAction, { kind: 'place' }>;

/** The store methods the reconciler needs (narrow ports, CONVENTIONS 4). */
export interface ReconcilerStore {
  readonly replicas: Pick<ReplicaRepository, 'place' | 'placeAll' | 'update' | 'evict'>;
  readonly events: Pick<EventRepository, 'record'>;
}

/** What the reconciler asks of the rest of the controller. */
export interface ReconcilerContext {
  readonly clock: Clock;
  readonly timing: PlanTiming;
  readonly nodes: NodeRegistry;
  readonly replicas: ReplicaRegistry;
  /** The agents' commands: start, stop, fetch. */
  readonly commands: Pick<AgentCommands, 'startReplica' | 'stopReplica' | 'fetchWeights'>;
  /** Ids of new replicas. */
  readonly ids: ReplicaIds;
  readonly store: ReconcilerStore;
  catalog(): CurrentCatalog | undefined;
  /** Leading, state loaded and adoption settled: commands and placements are allowed. */
  mayAct(): boolean;
  /** The fence for replica writes; throws when not leading. */
  fence(): Fence;
}

/** Result of one pass, for logs, the admin status and the benchmark. */
export interface PassReport {
  /** When the pass started, ms since the epoch. */
  readonly at: number;
  readonly actions: number;
  /** Time spent planning (pure), ms. */
  readonly planMs: number;
  /** Whole pass including store writes and commands, ms. */
  readonly totalMs: number;
}

/**
 * Applies `planReconcile` to the live cluster. Passes never overlap: a pass asked for while one
 * runs runs once more afterwards. Each pass plans from snapshots taken at its start, then applies
 * the actions in order; after every `await` it re-reads what it touches by id, because agent
 * reports change entries concurrently. A record is written (fenced) before the command that
 * acts on it is sent, so a deposed leader's write fails before any agent hears from it.
 */
export class Reconciler {
  /** Models that fit nowhere, with reasons and their retry time. */
  readonly unplaceable = new Map<string, UnplaceableState>();
  /** The last pass that ran (leading, settled, with a catalog); undefined before the first. */
  lastPass: PassReport | undefined;
  /** The last pass that changed anything (placed, stopped, restarted...). */
  lastActivePass: PassReport | undefined;
  private readonly avoid = new Map<string, Map<string, number>>();
  private readonly unknownStops = new Map<string, number>();
  private running: Promise<PassReport | undefined> | undefined;
  private again = false;
  /** Grows when capacity may have appeared; see PlanInput.capacityEpoch. */
  private capacity = 0;
  private readonly passListeners: ((seconds: number, actions: number) => void)[] = [];
  private readonly log: Logger;
  private readonly event: RecordEvent;

  constructor(
    private readonly ctx: ReconcilerContext,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'Reconciler' });
    this.event = eventRecorder(ctx.store.events, ctx.clock, this.log);
  }

  /** Capacity may have appeared (a node joined or became healthy, a replica went, the catalog changed): models that fit nowhere are tried again. */
  capacityChanged(): void {
    this.capacity += 1;
  }

  /** Calls `listener` with each pass's duration (seconds) and action count, for the reconcile-duration histogram. */
  onPass(listener: (seconds: number, actions: number) => void): void {
    this.passListeners.push(listener);
  }

  /** Runs a pass now (or once more after the running one). Never rejects. */
  pass(): Promise<PassReport | undefined> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.loop().finally(() => (this.running = undefined));
    return this.running;
  }

  /** Forgets per-term bookkeeping (a new leadership term starts from the store). */
  reset(): void {
    this.unplaceable.clear();
    this.avoid.clear();
    this.unknownStops.clear();
  }

  private async loop(): Promise<PassReport | undefined> {
    let report: PassReport | undefined;
    do {
      this.again = false;
      try {
        report = await this.once();
      } catch (error) {
        this.log.error({ err: error }, 'reconcile pass failed');
      }
    } while (this.again);
    return report;
  }

  private async once(): Promise<PassReport | undefined> {
    const current = this.ctx.catalog();
    if (!this.ctx.mayAct() || !current) return undefined;
    const started = performance.now();
    const now = this.ctx.clock.now();
    this.prune(now);
    const actions = planReconcile({
      now,
      catalog: current.catalog,
      nodes: this.ctx.nodes.snapshot(),
      replicas: this.ctx.replicas.snapshot(),
      unplaceable: this.unplaceable,
      avoid: this.avoid,
      unknownStops: this.unknownStops,
      capacityEpoch: this.capacity,
      timing: this.ctx.timing,
      newReplicaId: (model) => this.ctx.ids.next(model),
    });
    const planMs = performance.now() - started;
    for (let i = 0; i < actions.length; i++) {
      if (!this.ctx.mayAct()) break;
      const action = actions[i];
      if (action.kind === 'place') {
        // Placements next to each other are stored in one transaction (see placeAll).
        const batch = [action];
        while (actions[i + 1]?.kind === 'place') batch.push(actions[++i] as PlaceAction);
        await this.placeAll(batch, current.catalog);
        continue;
      }
      try {
        await this.apply(action, current.catalog);
      } catch (error) {
        this.log.warn({ err: error, action: action.kind, replicaId: 'replicaId' in action ? action.replicaId : undefined }, 'reconcile action failed; the next pass retries');
      }
    }
    const totalMs = performance.now() - started;
    for (const l of this.passListeners) l(totalMs / 1000, actions.length);
    if (actions.length > 0) this.log.debug({ actions: actions.length, planMs, totalMs }, 'reconcile pass');
    this.lastPass = { at: now, actions: actions.length, planMs, totalMs };
    if (actions.length > 0) this.lastActivePass = this.lastPass;
    return this.lastPass;
  }

  private async apply(a: PlanAction, catalog: Catalog): Promise<void> {
    const now = this.ctx.clock.now();
    switch (a.kind) {
      case 'place':
        return this.placeAll([a], catalog);
      case 'stop':
        return this.stop(a.replicaId, a.reason, a.event, now);
      case 'move': {
        const entry = this.ctx.replicas.get(a.replicaId);
        if (!entry) return;
        const avoid = this.avoid.get(entry.replica.model) ?? new Map<string, number>();
        for (const m of entry.replica.members) avoid.set(m.nodeId, a.avoidUntil);
        this.avoid.set(entry.replica.model, avoid);
        return this.stop(a.replicaId, a.reason, 'evicted', now);
      }
      case 'resend-stop': {
        const entry = this.ctx.replicas.update(a.replicaId, (e) => (e.replica.state === 'draining' ? { ...e, stopSentAt: now } : e));
        if (entry?.replica.state !== 'draining') return;
        for (const nodeId of a.nodeIds) this.ctx.commands.stopReplica(nodeId, a.replicaId);
        return;
      }
      case 'forget':
        return this.forget(a.replicaId, a.event, a.reason);
      case 'restart': {
        const entry = this.ctx.replicas.update(a.replicaId, (e) => {
          if (e.replica.state !== 'failed') return e;
          const { reason: _r, ...replica } = e.replica;
          const { failedAt: _f, retryAt: _t, ...rest } = e;
          return { ...rest, memberStates: {}, dirty: true, commandSentAt: now, replica: { ...replica, state: 'pending', restarts: replica.restarts + 1, updatedAt: now } };
        });
        if (!entry || entry.replica.state !== 'pending') return;
        this.event({ kind: 'placed', model: entry.replica.model, replicaId: a.replicaId, reason: `restart ${entry.replica.restarts} in place after failing` });
        for (const m of entry.replica.members) this.start(a.replicaId, m.nodeId);
        return;
      }
      case 'resend-start': {
        const entry = this.ctx.replicas.update(a.replicaId, (e) =>
          e.replica.state === 'ready' || e.replica.state === 'starting'
            ? { ...e, dirty: true, memberStates: {}, replica: { ...e.replica, state: 'pending', updatedAt: now } }
            : e,
        );
        if (!entry) return;
        this.log.info({ replicaId: a.replicaId, nodes: a.nodeIds }, 'agent does not list the replica; sending its start again');
        for (const nodeId of a.nodeIds) this.start(a.replicaId, nodeId);
        return;
      }
      case 'stop-unknown': {
        this.unknownStops.set(`${a.nodeId}/${a.replicaId}`, now);
        if (!this.ctx.commands.stopReplica(a.nodeId, a.replicaId)) return;
        this.log.info({ nodeId: a.nodeId, replicaId: a.replicaId, model: a.model }, 'stopping a replica nobody placed');
        this.event({ kind: 'evicted', model: a.model, replicaId: a.replicaId, nodeId: a.nodeId, reason: 'running on the node but not placed by the controller' });
        return;
      }
      case 'unplaceable': {
        const previous = this.unplaceable.get(a.model);
        this.unplaceable.set(a.model, a.state);
        if (!previous || previous.summary !== a.state.summary) {
          this.log.warn({ model: a.model, reason: a.state.summary, retryInMs: a.state.retryAt - now }, 'model fits nowhere');
          this.event({ kind: 'unplaceable', model: a.model, reason: a.state.summary });
        }
        return;
      }
      case 'placeable':
        this.unplaceable.delete(a.model);
        return;
    }
  }

  /**
   * Stores placements in one fenced transaction, then registers them and sends their commands. A
   * batch the store refuses as a whole (an id taken meanwhile) is tried one by one, so only the
   * replica at fault waits for the next pass; a fenced batch places nothing.
   */
  private async placeAll(batch: readonly PlaceAction[], catalog: Catalog): Promise<void> {
    const now = this.ctx.clock.now();
    const ready = batch.map((a) => this.placement(a, catalog, now)).filter((p) => p !== undefined);
    if (ready.length === 0) return;
    try {
      await this.ctx.store.replicas.placeAll(
        ready.map((p) => p.replica),
        this.ctx.fence(),
      );
    } catch (error) {
      if (ready.length === 1 || !(error instanceof DomainError) || error.code !== ErrorCode.Conflict) {
        this.log.warn({ err: error, action: 'place', replicas: ready.length }, 'reconcile action failed; the next pass retries');
        return;
      }
      for (const p of ready) {
        try {
          await this.ctx.store.replicas.place(p.replica, this.ctx.fence());
          this.placed(p.action, p.replica, p.model, now);
        } catch (one) {
          this.log.warn({ err: one, action: 'place', replicaId: p.replica.id }, 'reconcile action failed; the next pass retries');
        }
      }
      return;
    }
    for (const p of ready) this.placed(p.action, p.replica, p.model, now);
  }

  /** The replica a placement stores, or undefined when its model or a node changed since the plan. */
  private placement(a: PlaceAction, catalog: Catalog, now: number): { action: PlaceAction; replica: Replica; model: Model } | undefined {
    const model = catalog.get(a.model);
    const profile = model?.profiles[a.profileIndex];
    if (!model || !profile) return undefined;
    for (const m of a.members) {
      const node = this.ctx.nodes.get(m.nodeId);
      // The node changed since the snapshot (gone, silent, cordoned): the next pass decides again.
      if (!node?.connected || node.info.state !== 'healthy' || node.info.cordoned) return undefined;
    }
    const replica: Replica = {
      id: a.replicaId,
      model: model.name,
      profileIndex: a.profileIndex,
      engine: profile.engine,
      members: a.members,
      state: a.fetchOn.length > 0 ? 'fetching' : 'pending',
      restarts: 0,
      createdAt: now,
      updatedAt: now,
    };
    return { action: a, replica, model };
  }

  /** A stored placement: registered, logged, and its fetch or start sent. */
  private placed(a: PlaceAction, replica: Replica, model: Model, now: number): void {
    this.ctx.replicas.add({ replica, memberStates: {}, persisted: true, dirty: false, fetching: [...a.fetchOn], commandSentAt: now });
    const where = a.members.map((m) => `${m.nodeId}[${m.gpuIndices.join(',')}]`).join(' ');
    this.log.info({ replicaId: a.replicaId, model: model.name, profile: a.profileIndex, members: where }, 'replica placed');
    this.event({ kind: 'placed', model: model.name, replicaId: a.replicaId, nodeId: a.members[0].nodeId, reason: `profile ${a.profileIndex} on ${where}` });
    for (const m of a.members) {
      if (a.fetchOn.includes(m.nodeId)) this.fetchThenStart(a.replicaId, m.nodeId, model);
      else this.start(a.replicaId, m.nodeId);
    }
  }

  /** FetchWeights, then StartReplica once the agent says the weights are there. */
  private fetchThenStart(replicaId: string, nodeId: string, model: NonNullable<ReturnType<Catalog['get']>>): void {
    if (!this.ctx.mayAct()) return this.start(replicaId, nodeId);
    const fetching = this.ctx.commands.fetchWeights(nodeId, model, (result, outcome) => {
      const entry = this.ctx.replicas.update(replicaId, (e) => ({ ...e, fetching: e.fetching.filter((n) => n !== nodeId) }));
      if (!entry || outcome !== 'answered') return; // unanswered: the planner sends the start again after its grace
      if (result.ok) return this.start(replicaId, nodeId);
      this.event({ kind: 'refused', model: entry.replica.model, replicaId, nodeId, reason: `weights fetch failed: ${result.message}` });
      this.memberFailed(replicaId, nodeId, `fetching weights failed: ${result.message}`);
    });
    // Nothing to fetch (a `file://` source is used in place): start it now.
    if (!fetching) this.start(replicaId, nodeId);
  }

  /** StartReplica for one member, built from the entry as it is now. */
  private start(replicaId: string, nodeId: string): void {
    const entry = this.ctx.replicas.get(replicaId);
    const current = this.ctx.catalog();
    if (!entry || !current || !this.ctx.mayAct()) return;
    if (!['pending', 'fetching', 'starting', 'ready'].includes(entry.replica.state)) return;
    const model = current.catalog.get(entry.replica.model);
    const member = entry.replica.members.find((m) => m.nodeId === nodeId);
    if (!model || !member || model.profiles[entry.replica.profileIndex] === undefined) return;
    // A multi-node member other than rank 0 waits for the rendezvous port rank 0 picks
    // (rendezvousKnown sends it then).
    if (awaitsRendezvous(member, entry.replica.members)) return;
    const addressOf = (id: string): string => this.ctx.nodes.get(id)?.info.address ?? id;
    const order = { replicaId, model, profileIndex: entry.replica.profileIndex, member, members: entry.replica.members, addressOf };
    const sent = this.ctx.commands.startReplica(nodeId, order, (result, outcome) => {
      if (outcome !== 'answered' || result.ok) return;
      this.event({ kind: 'refused', model: entry.replica.model, replicaId, nodeId, reason: `start refused by the agent: ${result.message}` });
      this.memberFailed(replicaId, nodeId, `start refused: ${result.message}`);
    });
    if (sent) this.ctx.replicas.update(replicaId, (e) => ({ ...e, commandSentAt: this.ctx.clock.now() }));
  }

  /**
   * Rank 0 of a multi-node replica reported the rendezvous port it picked: StartReplica for the
   * other members, which waited for it. Idempotent (an agent already running a member answers
   * with its state).
   */
  rendezvousKnown(replicaId: string): void {
    const entry = this.ctx.replicas.get(replicaId);
    if (!entry) return;
    for (const m of entry.replica.members) {
      if (m.rank !== 0 && !entry.fetching.includes(m.nodeId)) this.start(replicaId, m.nodeId);
    }
  }

  private memberFailed(replicaId: string, nodeId: string, reason: string): void {
    const before = this.ctx.replicas.get(replicaId);
    const after = this.ctx.replicas.report(replicaId, { nodeId, state: 'failed', reason }, this.ctx.clock.now());
    if (after && before?.replica.state !== 'failed' && after.replica.state === 'failed') {
      this.log.warn({ replicaId, nodeId, reason }, 'replica failed');
      this.event({ kind: 'failed', model: after.replica.model, replicaId, nodeId, reason });
    }
  }

  private async stop(replicaId: string, reason: string, event: 'stopped' | 'evicted', now: number): Promise<void> {
    const stoppable = (e: ReplicaEntry | undefined): e is ReplicaEntry => e !== undefined && !['draining', 'stopped', 'lost'].includes(e.replica.state);
    const before = this.ctx.replicas.get(replicaId);
    if (!stoppable(before)) return;
    // Stored (fenced) before any agent hears of it: a deposed leader's stop stops nothing, and
    // the next leader does not load as ready, and publish, a replica already told to stop.
    if (before.persisted) await this.ctx.store.replicas.update(replicaId, { state: 'draining', reason, updatedAt: now }, this.ctx.fence());
    if (!stoppable(this.ctx.replicas.get(replicaId))) return;
    const entry = this.ctx.replicas.update(replicaId, (e) => ({
      ...e,
      dirty: true,
      memberStates: {},
      stopSentAt: now,
      stopReason: reason,
      replica: { ...e.replica, state: 'draining', reason, updatedAt: now },
    })) as ReplicaEntry;
    this.log.info({ replicaId, model: entry.replica.model, reason }, 'stopping replica');
    this.event({ kind: event, model: entry.replica.model, replicaId, nodeId: entry.replica.members[0]?.nodeId, reason });
    for (const m of entry.replica.members) this.ctx.commands.stopReplica(m.nodeId, replicaId);
  }

  private async forget(replicaId: string, event: 'stopped' | 'lost', reason: string): Promise<void> {
    const entry = this.ctx.replicas.get(replicaId);
    if (!entry) return;
    if (entry.persisted) await this.ctx.store.replicas.evict(replicaId, this.ctx.fence());
    const latest = this.ctx.replicas.get(replicaId) as ReplicaEntry | undefined;
    this.ctx.replicas.remove(replicaId);
    this.capacityChanged();
    const r = (latest ?? entry).replica;
    if (event === 'lost') {
      this.log.warn({ replicaId, model: r.model, reason }, 'replica lost');
      // Members on nodes that are still there are told to stop: the replica is rebuilt elsewhere.
      for (const m of r.members) if (this.ctx.nodes.get(m.nodeId)?.info.state !== 'lost') this.ctx.commands.stopReplica(m.nodeId, replicaId);
    } else {
      this.log.info({ replicaId, model: r.model, reason }, 'replica removed');
    }
    this.event({ kind: event, model: r.model, replicaId, nodeId: r.members[0]?.nodeId, reason });
  }

  private prune(now: number): void {
    for (const [key, at] of this.unknownStops) if (now - at > this.ctx.timing.backoffMaxMs) this.unknownStops.delete(key);
    for (const [model, nodes] of this.avoid) {
      for (const [nodeId, until] of nodes) if (until <= now) nodes.delete(nodeId);
      if (nodes.size === 0) this.avoid.delete(model);
    }
  }
}
