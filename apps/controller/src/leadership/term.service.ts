import type { Clock } from '@llmgw/domain';
import type { NodeRepository, ReplicaRepository } from '@llmgw/store';
import type { Logger } from 'pino';
import type { ControllerTiming } from '../config/controller.config';
import type { Admission } from '../grpc/agent.service';
import type { AgentCommands } from '../nodes/agent-commands.port';
import type { NodeRegistry } from '../nodes/node.registry';
import type { ReplicaRegistry } from '../replicas/replica.registry';
import type { LeadershipListener, LeadershipService } from './leadership.service';
import { settleDecision } from './settle.policy';

/** Where this controller stands: not leading; leading and loading the store; waiting for agents to reconnect; acting. */
export type Phase = 'standby' | 'loading' | 'settling' | 'active';

/** What a term is built from (narrow ports; the term owns none of them). */
export interface TermDeps {
  readonly clock: Clock;
  readonly timing: Pick<ControllerTiming, 'settleMs' | 'settleHoldersMs' | 'tickMs'>;
  readonly store: { readonly nodes: Pick<NodeRepository, 'list'>; readonly replicas: Pick<ReplicaRepository, 'list'> };
  readonly leadership: Pick<LeadershipService, 'isLeader' | 'leaderElsewhere'>;
  readonly nodes: Pick<NodeRegistry, 'loadFromStore' | 'get'>;
  readonly replicas: Pick<ReplicaRegistry, 'loadFromStore' | 'size'>;
  /** The endpoint publisher: opened once a term's state is loaded, told when the lead is lost. */
  readonly publishing: { open(): void; leadershipLost(): void };
  readonly commands: Pick<AgentCommands, 'closeAll'>;
}

/**
 * The leadership term's phase machine. Taking the lead loads the cluster state from the store
 * (retrying), then settles: it adopts what agents report until every known agent is back or the
 * settling window (longer while nodes that held replicas are missing) is over, and only then
 * is active. Losing the lead makes it a standby at once and closes every agent stream with
 * NotLeader. Told by LeadershipService (it is its listener).
 */
export class TermService implements LeadershipListener {
  private phaseValue: Phase = 'standby';
  private stoppedValue = false;
  private readonly listeners: ((phase: Phase) => void)[] = [];
  private settleUntil = 0;
  /** The latest settling lasts while nodes that held replicas are missing. */
  private holdersUntil = 0;
  /** Nodes the store knew (not lost) when this term began: settling ends early once all of them reconnect. */
  private awaited = new Set<string>();
  /** Of those, the ones the store said hold replicas: settling waits longer for them (bounded). */
  private holders = new Set<string>();
  private extendedLogged = false;
  private loading: Promise<void> | undefined;
  /** Counts terms begun and ended: a load belongs to the term it began in, and stops once that one is over. */
  private termSeq = 0;
  private readonly log: Logger;

  constructor(
    private readonly deps: TermDeps,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'ControlPlane' });
  }

  get phase(): Phase {
    return this.phaseValue;
  }

  /** Set by {@link stop}: the controller is shutting down. */
  get stopped(): boolean {
    return this.stoppedValue;
  }

  /** Calls `listener` with each phase entered (after it is entered). */
  onPhase(listener: (phase: Phase) => void): void {
    this.listeners.push(listener);
  }

  /** Leading, state loaded, adoption settled and not shutting down: commands and placements are allowed. */
  mayAct(): boolean {
    return this.phaseValue === 'active' && this.deps.leadership.isLeader() && !this.stoppedValue;
  }

  /** Shutting down: a load in progress gives up, and agents are told to go elsewhere. */
  stop(): void {
    this.stoppedValue = true;
  }

  /** Resolves once a leader has its state loaded. */
  async whenLoaded(): Promise<void> {
    await this.loading;
  }

  /**
   * Whether this controller takes agents and routers at this instant: leading, its state loaded,
   * not shutting down. A stream admitted earlier asks again right before it is kept: leadership
   * may have ended (and its streams been closed) while the stream waited on the store.
   */
  leads(): boolean {
    return this.deps.leadership.isLeader() && !this.stoppedValue && (this.phaseValue === 'settling' || this.phaseValue === 'active');
  }

  /** Whether this controller takes agents and routers now (waiting for its state to load), and where the leader is when it does not. */
  async admit(): Promise<Admission> {
    const { leadership } = this.deps;
    // A term that began while an earlier term's load was awaited has a load of its own: wait for that.
    for (let awaited: Promise<void> | undefined; leadership.isLeader() && !this.stoppedValue && awaited !== this.loading; ) {
      awaited = this.loading;
      await awaited;
    }
    if (this.leads()) return { leader: true };
    const elsewhere = await leadership.leaderElsewhere().catch(() => undefined);
    return elsewhere !== undefined ? { leader: false, leaderAddress: elsewhere } : { leader: false };
  }

  startedLeading(): void {
    this.enter('loading');
    const { store, timing, clock, leadership } = this.deps;
    // A term lost and won again while a load waited on the store (the same owner can renew right
    // after its claim lapsed) has a load of its own: the older one must not apply what it read
    // after agents have registered with the newer term.
    const term = ++this.termSeq;
    const current = (): boolean => term === this.termSeq && leadership.isLeader() && !this.stoppedValue;
    const load = async (): Promise<void> => {
      for (;;) {
        try {
          const [nodes, replicas] = await Promise.all([store.nodes.list(), store.replicas.list()]);
          if (!current()) return;
          const now = clock.now();
          this.deps.nodes.loadFromStore(nodes, now);
          this.deps.replicas.loadFromStore(replicas);
          this.awaited = new Set(nodes.filter((n) => n.state !== 'lost').map((n) => n.id));
          this.holders = new Set(replicas.filter((r) => r.state !== 'stopped').flatMap((r) => r.members.map((m) => m.nodeId)).filter((id) => this.awaited.has(id)));
          this.settleUntil = now + timing.settleMs;
          this.holdersUntil = this.settleUntil + timing.settleHoldersMs;
          this.extendedLogged = false;
          this.enter('settling');
          this.log.info(
            { nodes: nodes.length, draining: nodes.filter((n) => n.draining).length, replicas: replicas.length, settleMs: timing.settleMs },
            'leading: state loaded; adopting what agents report before acting',
          );
          this.checkSettled();
          this.deps.publishing.open();
          return;
        } catch (error) {
          this.log.warn({ err: error }, 'store: cannot load the cluster state; retrying');
          await new Promise((r) => setTimeout(r, timing.tickMs));
          if (!current()) return;
        }
      }
    };
    this.loading = load();
  }

  stoppedLeading(): void {
    this.termSeq += 1;
    this.enter('standby');
    // Agents and routers must follow the new leader; a standby holding their streams could not
    // command the agents, and would show routers a view nobody keeps current.
    this.deps.commands.closeAll('not-leader');
    this.deps.publishing.leadershipLost();
  }

  /** While settling: active once every awaited agent is back or the window is over (see settleDecision). */
  checkSettled(): void {
    if (this.phaseValue !== 'settling') return;
    const now = this.deps.clock.now();
    const d = settleDecision({
      now,
      settleUntil: this.settleUntil,
      holdersUntil: this.holdersUntil,
      awaited: this.awaited,
      holders: this.holders,
      connected: (id) => this.deps.nodes.get(id)?.connected === true,
    });
    if (!d.settled) {
      if (now >= this.settleUntil && !this.extendedLogged) {
        this.extendedLogged = true;
        this.log.info({ missing: d.missing, untilMs: this.holdersUntil - now }, 'settling window over, but nodes that held replicas are still reconnecting: waiting for them');
      }
      return;
    }
    const message = { 'all-back': 'every known agent is back: adoption settled', 'window-over': 'settling window over', 'holders-limit': 'settling window over; nodes that held replicas did not come back in time' }[d.why];
    this.phaseValue = 'active';
    this.log.info({ adopted: this.deps.replicas.size, missing: d.missing }, message);
    this.notify('active');
  }

  /**
   * A standby's view: the cluster state as the store has it (the leader writes it), skipped
   * when this controller took the lead meanwhile. Rejects when the store cannot answer.
   */
  async refreshStandby(): Promise<void> {
    const [nodes, replicas] = await Promise.all([this.deps.store.nodes.list(), this.deps.store.replicas.list()]);
    if (this.deps.leadership.isLeader()) return;
    this.deps.nodes.loadFromStore(nodes, 0);
    this.deps.replicas.loadFromStore(replicas);
  }

  private enter(phase: Phase): void {
    this.phaseValue = phase;
    this.notify(phase);
  }

  private notify(phase: Phase): void {
    for (const l of this.listeners) l(phase);
  }
}
