// The controller's composition root below Nest: builds the parts, routes agent reports and
// leadership changes between them, and runs the tick. Decisions live in the parts (planner,
// health policy, snapshot builder); this file only wires and sequences.
import { DomainError, ErrorCode, type Clock, type NodeState } from '@llmgw/domain';
import type { Store } from '@llmgw/store';
import type { Logger } from 'pino';
import type { MetricsRegistry } from '@llmgw/observability';
import { CatalogReloader, type CurrentCatalog } from './catalog/catalog.reloader';
import type { ControllerConfig } from './config/controller.config';
import { AgentConnect, type Admission, type AgentStreamHandler } from './grpc/agent.service';
import { AgentSessions, type AgentSession } from './grpc/agent.sessions';
import { GrpcAgentCommands } from './grpc/agent-commands.adapter';
import type { AgentCommands } from './nodes/agent-commands.port';
import { NodeCredentialService, type NodeAuthentication } from './nodes/node-credential.service';
import type { ReplicaStatusReport, UnheardFailureReport } from './grpc/proto.mapper';
import { RouterCalls } from './grpc/router.calls';
import { LeadershipService } from './leadership/leadership.service';
import { settleDecision } from './leadership/settle.policy';
import { registerClusterMetrics } from './metrics/cluster.collector';
import type { NodeEntry, NodeHeartbeat, NodeRegistration, ReplicaEntry, ReportedReplica } from '@llmgw/control';
import { nodeRecordOf, NodeRegistry, type NodeChange } from './nodes/node.registry';
import { EndpointPublisher } from './publishing/endpoint.publisher';
import { Reconciler } from './reconcile/replica.reconciler';
import type { ReplicaIds } from './reconcile/replica-ids';
import { ReplicaRegistry } from './replicas/replica.registry';
import { StatePersister } from './store/state.persister';
import { UsageTracker } from './usage/usage.tracker';
import { KeySetReader } from './publishing/key-set.reader';

/** What the control plane is built from. */
export interface ControlPlaneOptions {
  readonly config: ControllerConfig;
  readonly store: Store;
  readonly logger: Logger;
  readonly registry: MetricsRegistry;
  readonly clock?: Clock;
  readonly replicaIds: ReplicaIds;
}

/** Where this controller stands: not leading; leading and loading the store; waiting for agents to reconnect; acting. */
export type Phase = 'standby' | 'loading' | 'settling' | 'active';

const systemClock: Clock = { now: () => Date.now() };
/** The leader reads the usage every controller stored once this many ticks (5 s at the default 1 s tick). */
const USAGE_READ_EVERY_TICKS = 5;

/**
 * One controller process: node registry, replica registry, reconciler, publisher, usage
 * tracking, catalog reloading and leadership, behind one gRPC listener. As leader it adopts what
 * agents report for a settling window after taking the lead and only then starts or stops
 * anything; as a standby it turns agents away with NotLeader and serves reads (endpoints, admin,
 * metrics) from the store.
 */
export class ControlPlane implements AgentStreamHandler {
  readonly clock: Clock;
  readonly nodes = new NodeRegistry();
  readonly replicas = new ReplicaRegistry();
  readonly sessions: AgentSessions;
  readonly commands: AgentCommands;
  readonly publisher: EndpointPublisher;
  readonly usage: UsageTracker;
  readonly catalog: CatalogReloader;
  /** The API keys routers accept, from the store. */
  readonly keys: KeySetReader;
  readonly leadership: LeadershipService;
  readonly reconciler: Reconciler;
  private readonly persister: StatePersister;
  /** AgentService.Connect's handler, and RouterService's (served by the gRPC controllers). */
  readonly agentCalls: AgentConnect;
  readonly routerCalls: RouterCalls;
  private readonly credentials: NodeCredentialService;
  private readonly log: Logger;
  private phaseValue: Phase = 'standby';
  private termStartedAt = 0;
  /** Node ids an operator's `nodes forget` is removing now. */
  private readonly forgetting = new Set<string>();
  /** How many times each node id was forgotten: an identity check that spans one is void. */
  private readonly forgotten = new Map<string, number>();
  /** Identity checks reading or writing the store now, by node id (a forget waits for them). */
  private readonly checking = new Map<string, Set<Promise<unknown>>>();
  private settleUntil = 0;
  /** The latest settling lasts while nodes that held replicas are missing. */
  private holdersUntil = 0;
  /** Nodes the store knew (not lost) when this term began: settling ends early once all of them reconnect. */
  private awaited = new Set<string>();
  /** Of those, the ones the store said hold replicas: settling waits longer for them (bounded). */
  private holders = new Set<string>();
  private extendedLogged = false;
  private loading: Promise<void> | undefined;
  private capacity = 0;
  private tickTimer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private passTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private ticks = 0;

  constructor(private readonly options: ControlPlaneOptions) {
    const { config, store, logger } = options;
    this.clock = options.clock ?? systemClock;
    this.log = logger.child({ context: 'ControlPlane' });
    this.sessions = new AgentSessions(logger.child({ context: 'AgentSessions' }));
    this.commands = new GrpcAgentCommands(this.sessions);
    this.usage = new UsageTracker(this.replicas);
    this.catalog = new CatalogReloader(store.catalog, logger.child({ context: 'CatalogReloader' }));
    this.keys = new KeySetReader(store.apiKeys);

    this.leadership = new LeadershipService(
      config.lease,
      store.leases,
      { address: config.advertiseAddress, adminUrl: config.advertiseAdminUrl },
      this.clock,
      { startedLeading: () => this.beginTerm(), stoppedLeading: () => this.endTerm() },
      logger,
    );
    const metrics = registerClusterMetrics(options.registry, {
      clock: this.clock,
      nodes: () => this.nodes.snapshot(),
      replicas: () => this.replicas.snapshot(),
      unplaceable: () => this.reconciler.unplaceable,
      isLeader: () => this.leadership.isLeader(),
      catalogRevision: () => this.catalog.current()?.revision,
      rejectedCatalogRevision: () => this.catalog.rejected()?.revision,
      snapshotRevision: () => this.publisher.current()?.revision,
      watchers: () => this.publisher.sinkCount,
      agentStreams: () => this.sessions.size,
      commandsSent: () => this.sessions.sent,
    });
    this.publisher = new EndpointPublisher(
      { nodes: () => this.nodes.snapshot(), replicas: () => this.replicas.values(), catalog: () => this.catalog.current(), keys: () => this.keys.current() },
      logger.child({ context: 'EndpointPublisher' }),
      (seconds) => metrics.observePublish(seconds),
    );
    const timing = config.timing;
    this.reconciler = new Reconciler(
      {
        clock: this.clock,
        timing: {
          backoffMinMs: timing.backoffMinMs,
          backoffMaxMs: timing.backoffMaxMs,
          maxRestarts: timing.maxRestarts,
          commandGraceMs: Math.max(2 * timing.heartbeatIntervalMs, 2 * timing.tickMs),
        },
        nodes: this.nodes,
        replicas: this.replicas,
        commands: this.commands,
        ids: options.replicaIds,
        store,
        catalog: () => this.catalog.current(),
        mayAct: () => this.phaseValue === 'active' && this.leadership.isLeader() && !this.stopped,
        fence: () => this.leadership.fence(),
        capacityEpoch: () => this.capacity,
        bumpCapacity: () => this.bumpCapacity(),
        observePass: (seconds) => metrics.observePass(seconds),
      },
      logger,
    );
    this.persister = new StatePersister(store, this.nodes, this.replicas, this.usage, () => this.leadership.fence(), logger, (id) => this.forgetting.has(id));
    this.nodes.onChange((change) => this.nodeChanged(change));
    this.replicas.onChange(() => this.publisher.schedule());
    this.catalog.onSwap(() => {
      this.bumpCapacity();
      this.publisher.schedule();
      this.requestPass();
    });
    this.credentials = new NodeCredentialService(store.nodes, this.clock);
    this.agentCalls = new AgentConnect(this, logger);
    this.routerCalls = new RouterCalls(
      this.publisher,
      this.usage,
      {
        clock: this.clock,
        futureUsageClamped: (n) => metrics.countFutureUsage(n),
        admit: () => this.admit(),
        writeKeyUsage: (rows) => store.keyUsage.add(rows),
      },
      logger,
    );
  }

  get phase(): Phase {
    return this.phaseValue;
  }

  get controllerId(): string {
    return this.leadership.ownerId;
  }

  get heartbeatIntervalMs(): number {
    return this.options.config.timing.heartbeatIntervalMs;
  }

  /** The catalog in force, or undefined before one is loaded. */
  currentCatalog(): CurrentCatalog | undefined {
    return this.catalog.current();
  }

  /**
   * Loads the catalog (seeding the store from the catalog file if it has none), joins leadership
   * and starts the tick (the gRPC transport that serves agents and routers is Nest's, started
   * beside it: controller.module.ts). A catalog file that does not validate rejects.
   */
  async start(): Promise<void> {
    const { config } = this.options;
    if (config.joinToken === undefined) this.log.warn('LLMGW_CONTROLLER_INSECURE_NO_AUTH: no join token; anyone who reaches the gRPC port can join as an agent');
    if (config.routerToken === undefined) this.log.warn('LLMGW_CONTROLLER_INSECURE_NO_AUTH: no router token; anyone who reaches the gRPC port can watch endpoints and report usage');
    await this.catalog.start(config.catalogFile);
    this.leadership.start();
    // Nothing is published before the state is loaded: a router's first snapshot from a
    // restarted controller must carry the endpoints the store knows, not an empty list.
    if (this.leadership.isLeader()) await this.loading;
    else await this.refreshStandby().catch((error: unknown) => this.log.warn({ err: error }, 'store: cannot read the cluster state yet'));
    this.publisher.open();
    this.tickTimer = setInterval(() => void this.tick(), config.timing.tickMs);
    this.tickTimer.unref();
  }

  /** Flushes what the store has not seen and closes agent streams; the lease is kept until {@link release} (after the gRPC port closed). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.tickTimer);
    clearTimeout(this.passTimer);
    await this.ticking;
    if (this.leadership.isLeader()) await this.persister.flush();
    this.commands.closeAll('shutdown');
  }

  /** Gives up the lease (after {@link stop}). */
  async release(): Promise<void> {
    await this.stop();
    await this.leadership.stop();
  }

  /** Resolves once a leader has its state loaded. */
  async whenLoaded(): Promise<void> {
    await this.loading;
  }

  // ---- leadership ----

  private beginTerm(): void {
    this.phaseValue = 'loading';
    this.termStartedAt = this.clock.now();
    this.reconciler.reset();
    const load = async (): Promise<void> => {
      for (;;) {
        try {
          const [nodes, replicas] = await Promise.all([this.options.store.nodes.list(), this.options.store.replicas.list()]);
          if (!this.leadership.isLeader() || this.stopped) return;
          const now = this.clock.now();
          this.termStartedAt = now;
          this.nodes.loadFromStore(nodes, now);
          this.replicas.loadFromStore(replicas);
          this.awaited = new Set(nodes.filter((n) => n.state !== 'lost').map((n) => n.id));
          this.holders = new Set(replicas.filter((r) => r.state !== 'stopped').flatMap((r) => r.members.map((m) => m.nodeId)).filter((id) => this.awaited.has(id)));
          this.settleUntil = now + this.options.config.timing.settleMs;
          this.holdersUntil = this.settleUntil + this.options.config.timing.settleHoldersMs;
          this.extendedLogged = false;
          this.phaseValue = 'settling';
          this.log.info(
            { nodes: nodes.length, draining: nodes.filter((n) => n.draining).length, replicas: replicas.length, settleMs: this.options.config.timing.settleMs },
            'leading: state loaded; adopting what agents report before acting',
          );
          this.checkSettled();
          this.publisher.open();
          return;
        } catch (error) {
          this.log.warn({ err: error }, 'store: cannot load the cluster state; retrying');
          await new Promise((r) => setTimeout(r, this.options.config.timing.tickMs));
          if (!this.leadership.isLeader() || this.stopped) return;
        }
      }
    };
    this.loading = load();
  }

  private endTerm(): void {
    this.phaseValue = 'standby';
    this.reconciler.reset();
    // Agents and routers must follow the new leader; a standby holding their streams could not
    // command the agents, and would show routers a view nobody keeps current.
    this.commands.closeAll('not-leader');
    this.publisher.leadershipLost();
  }

  private checkSettled(): void {
    if (this.phaseValue !== 'settling') return;
    const now = this.clock.now();
    const d = settleDecision({
      now,
      settleUntil: this.settleUntil,
      holdersUntil: this.holdersUntil,
      awaited: this.awaited,
      holders: this.holders,
      connected: (id) => this.nodes.get(id)?.connected === true,
    });
    if (!d.settled) {
      if (now >= this.settleUntil && !this.extendedLogged) {
        this.extendedLogged = true;
        this.log.info({ missing: d.missing, untilMs: this.holdersUntil - now }, 'settling window over, but nodes that held replicas are still reconnecting: waiting for them');
      }
      return;
    }
    this.phaseValue = 'active';
    const message = { 'all-back': 'every known agent is back: adoption settled', 'window-over': 'settling window over', 'holders-limit': 'settling window over; nodes that held replicas did not come back in time' }[d.why];
    this.log.info({ adopted: this.replicas.size, missing: d.missing }, message);
    this.requestPass();
  }

  async admit(): Promise<Admission> {
    if (this.leadership.isLeader() && !this.stopped) {
      await this.loading;
      if (this.leadership.isLeader() && this.phaseValue !== 'standby') return { leader: true };
    }
    const elsewhere = await this.leadership.leaderElsewhere().catch(() => undefined);
    return elsewhere !== undefined ? { leader: false, leaderAddress: elsewhere } : { leader: false };
  }

  // ---- agent reports ----

  /**
   * Checks a Register's node secret (see NodeCredentialService). Rejects (the agent is told
   * UNAVAILABLE and retries) while the id is being forgotten, and when a forget began while the
   * check ran: its answer may come from a credential the forget removes, and accepting it would
   * leave a live session on an id with no credential, open to any agent with the join token.
   */
  async authenticate(nodeId: string, secret: string | undefined): Promise<NodeAuthentication> {
    if (this.forgetting.has(nodeId)) throw new Error(`node '${nodeId}' is being forgotten`);
    const generation = this.forgotten.get(nodeId) ?? 0;
    const check = this.credentials.authenticate(nodeId, secret);
    const inFlight = this.checking.get(nodeId) ?? new Set<Promise<unknown>>();
    this.checking.set(nodeId, inFlight.add(check));
    let auth: NodeAuthentication;
    try {
      auth = await check;
    } finally {
      inFlight.delete(check);
      if (inFlight.size === 0 && this.checking.get(nodeId) === inFlight) this.checking.delete(nodeId);
    }
    if ((this.forgotten.get(nodeId) ?? 0) !== generation) throw new Error(`node '${nodeId}' was forgotten while its identity was checked`);
    return auth;
  }

  releaseSecret(nodeId: string, issued: string): Promise<void> {
    return this.credentials.release(nodeId, issued);
  }

  registered(session: AgentSession, registration: NodeRegistration): void {
    this.sessions.attach(session);
    const previous = this.nodes.get(registration.id);
    this.nodes.register(registration, this.clock.now());
    this.log.info(
      { nodeId: registration.id, address: registration.address, gpus: registration.gpus.length, replicas: registration.replicas.length, was: previous?.info.state },
      previous ? 'agent reconnected' : 'node joined',
    );
    for (const r of registration.replicas) this.observe(registration.id, r);
    this.checkSettled();
  }

  /**
   * Engine failures an agent could not report while no leader listened (each followed by the
   * agent's own restart unless it gave up): each becomes a `failed` event at the time it
   * happened, and counts as a restart of its replica, as a failure seen live does. The replica's
   * state is not touched: Register says how it stands now.
   */
  unheardFailures(nodeId: string, unheard: readonly UnheardFailureReport[]): void {
    if (unheard.length === 0) return;
    const now = this.clock.now();
    const perReplica = new Map<string, number>();
    for (const u of unheard) {
      const { replicaId, reason } = u.status;
      const model = this.replicas.get(replicaId)?.replica.model;
      perReplica.set(replicaId, (perReplica.get(replicaId) ?? 0) + 1);
      this.recordEvent({
        kind: 'failed',
        time: Math.min(u.at, now),
        replicaId,
        nodeId,
        ...(model !== undefined ? { model } : {}),
        reason: `${reason ?? 'engine failed'} (while no leader listened)`,
      });
    }
    for (const [replicaId, n] of perReplica) {
      if (!this.replicas.get(replicaId)) continue;
      this.replicas.update(replicaId, (e) => ({ ...e, dirty: true, replica: { ...e.replica, restarts: e.replica.restarts + n } }));
    }
    this.log.warn({ nodeId, failures: unheard.length, replicas: [...perReplica.keys()] }, 'agent reported engine failures no leader heard');
  }

  heartbeat(nodeId: string, heartbeat: NodeHeartbeat): void {
    const before = this.nodes.get(nodeId)?.reported;
    if (!before || !this.nodes.heartbeat(nodeId, heartbeat, this.clock.now())) return;
    for (const r of heartbeat.replicas) {
      // Most heartbeats repeat what the node already said: fold only what is new to the replica.
      const was = before.get(r.replicaId);
      const known = this.replicas.get(r.replicaId);
      if (was && known && known.memberStates[nodeId] !== undefined && was.state === r.state && was.port === r.port && was.rendezvousPort === r.rendezvousPort && was.reason === r.reason) continue;
      this.observe(nodeId, r);
    }
  }

  replicaStatus(nodeId: string, status: ReplicaStatusReport): void {
    this.nodes.replicaChanged(nodeId, {
      replicaId: status.replicaId,
      state: status.state,
      restarts: status.restarts,
      ...(status.reason !== undefined ? { reason: status.reason } : {}),
      ...(status.port !== undefined ? { port: status.port } : {}),
      ...(status.rendezvousPort !== undefined ? { rendezvousPort: status.rendezvousPort } : {}),
    });
    this.fold(nodeId, status.replicaId, status.state, status.reason, status.port, status.rendezvousPort);
  }

  disconnected(session: AgentSession): void {
    if (!this.sessions.detach(session)) return;
    this.log.info({ nodeId: session.nodeId }, 'agent stream closed');
    this.nodes.disconnected(session.nodeId);
  }

  /** One replica as an agent reports it: folded into the known replica, or adopted while settling. */
  private observe(nodeId: string, r: ReportedReplica): void {
    const known = this.replicas.get(r.replicaId);
    if (!known && this.phaseValue === 'settling' && this.leadership.isLeader()) this.adopt(nodeId, r);
    else if (known && !known.replica.members.some((m) => m.nodeId === nodeId) && !known.persisted && this.phaseValue === 'settling') this.adoptMember(nodeId, r);
    this.fold(nodeId, r.replicaId, r.state, r.reason, r.port, r.rendezvousPort);
  }

  private fold(nodeId: string, replicaId: string, state: ReportedReplica['state'], reason: string | undefined, port: number | undefined, rendezvousPort?: number): void {
    const before = this.replicas.get(replicaId);
    if (!before) return;
    const report = { nodeId, state, ...(reason !== undefined ? { reason } : {}), ...(port !== undefined ? { port } : {}), ...(rendezvousPort !== undefined ? { rendezvousPort } : {}) };
    const after = this.replicas.report(replicaId, report, this.clock.now());
    const leaderPort = (e: typeof before): number | undefined => e.replica.members.find((m) => m.rank === 0)?.rendezvousPort;
    // Rank 0 announced (or changed) where the members meet: the others can be started now.
    if (after && leaderPort(after) !== undefined && leaderPort(after) !== leaderPort(before)) this.reconciler.rendezvousKnown(replicaId);
    if (!after || after === before || after.replica.state === before.replica.state) return;
    if (after.replica.state === 'failed') {
      this.log.warn({ replicaId, nodeId, reason: after.replica.reason }, 'replica failed');
      this.recordEvent({ kind: 'failed', model: after.replica.model, replicaId, nodeId, ...(after.replica.reason ? { reason: after.replica.reason } : {}) });
    } else if (after.replica.state === 'ready') {
      this.log.info({ replicaId, nodeId, model: after.replica.model }, 'replica ready');
    }
    if (after.replica.state === 'failed' || after.replica.state === 'stopped') this.requestPass();
  }

  private adopt(nodeId: string, r: ReportedReplica): void {
    if (r.state === 'stopped') return;
    const now = this.clock.now();
    const model = this.catalog.current()?.catalog.get(r.model);
    const profileIndex = Math.max(0, model?.profiles.findIndex((p) => p.engine === r.engine && p.gpusPerNode === r.gpuIndices.length) ?? 0);
    const entry: ReplicaEntry = {
      replica: {
        id: r.replicaId,
        model: r.model,
        profileIndex,
        engine: r.engine,
        members: [{ nodeId, rank: r.rank, gpuIndices: [...r.gpuIndices], ...(r.port !== undefined ? { port: r.port } : {}), ...(r.rendezvousPort !== undefined ? { rendezvousPort: r.rendezvousPort } : {}) }],
        state: 'pending',
        restarts: 0,
        createdAt: now,
        updatedAt: now,
      },
      memberStates: {},
      persisted: false,
      dirty: true,
      fetching: [],
    };
    this.replicas.add(entry);
    this.log.info({ replicaId: r.replicaId, model: r.model, nodeId }, 'adopted a replica the store did not know');
    this.recordEvent({ kind: 'adopted', model: r.model, replicaId: r.replicaId, nodeId, reason: 'reported by its agent while settling' });
  }

  private adoptMember(nodeId: string, r: ReportedReplica): void {
    this.replicas.update(r.replicaId, (e) => ({
      ...e,
      dirty: true,
      replica: {
        ...e.replica,
        members: [...e.replica.members, { nodeId, rank: r.rank, gpuIndices: [...r.gpuIndices], ...(r.port !== undefined ? { port: r.port } : {}), ...(r.rendezvousPort !== undefined ? { rendezvousPort: r.rendezvousPort } : {}) }].sort((a, b) => a.rank - b.rank),
      },
    }));
  }

  // ---- operator commands ----

  /**
   * Removes a lost node: its stored record and the credential bound to its id, so that a
   * re-installed machine can join under the same id again. Leader only. A node that is not lost
   * (or still has an agent stream) is a `conflict`: forgetting it would let another agent take
   * the id of a live node. Throws `not_found` for an unknown node.
   */
  async forgetNode(nodeId: string): Promise<void> {
    const entry = this.nodes.get(nodeId);
    if (!entry) throw new DomainError(ErrorCode.NotFound, `node '${nodeId}' is not known`);
    if (entry.info.state !== 'lost' || entry.connected || this.commands.connected(nodeId)) {
      throw new DomainError(
        ErrorCode.Conflict,
        `node '${nodeId}' is ${entry.info.state}${entry.connected ? ' and connected' : ''}: only a lost node can be forgotten (stop its agent and wait until the node is lost)`,
        [{ path: 'node', message: `is ${entry.info.state}, not lost` }],
      );
    }
    if (this.forgetting.has(nodeId)) throw new DomainError(ErrorCode.Conflict, `node '${nodeId}' is being forgotten already`);
    // From here no Register for the id is accepted, and one whose check began earlier is voided
    // (see authenticate); the store removal waits for those checks, so that it also removes a
    // credential one of them bound.
    this.forgetting.add(nodeId);
    this.forgotten.set(nodeId, (this.forgotten.get(nodeId) ?? 0) + 1);
    try {
      await Promise.allSettled([...(this.checking.get(nodeId) ?? [])]);
      // A flush that took this node's record before the forget began would write it back after
      // the removal; later flushes skip it while it is being forgotten.
      await this.persister.idle();
      await this.options.store.nodes.remove(nodeId);
    } finally {
      this.forgetting.delete(nodeId);
    }
    this.nodes.remove(nodeId);
    this.recordEvent({ kind: 'forgotten', nodeId, reason: 'operator: nodes forget' });
    this.log.info({ nodeId }, 'node forgotten: its record and node secret are removed');
  }

  /**
   * Cordons (no new replicas), drains (cordon, then move its replicas elsewhere, each stopped
   * once its replacement is ready) or uncordons a node. Leader only; throws for an unknown node.
   */
  async setCordon(nodeId: string, action: 'cordon' | 'uncordon' | 'drain'): Promise<NodeEntry> {
    const cordoned = action !== 'uncordon';
    const draining = action === 'drain';
    const entry = this.nodes.get(nodeId);
    if (!entry) throw new DomainError(ErrorCode.NotFound, `node '${nodeId}' is not known`);
    // The row may not be written yet (a node that just joined): insert it, then set the flags.
    // Both are stored, so a restarted or new leader carries a drain on.
    await this.options.store.nodes.upsert({ ...nodeRecordOf(entry), cordoned });
    await this.options.store.nodes.setCordoned(nodeId, cordoned, draining);
    this.nodes.setCordoned(nodeId, cordoned, draining);
    this.recordEvent({ kind: cordoned ? 'cordoned' : 'uncordoned', nodeId, reason: action });
    this.log.info({ nodeId, action }, 'node ' + (action === 'drain' ? 'draining' : `${action}ed`));
    if (!cordoned) this.bumpCapacity();
    this.requestPass();
    return this.nodes.get(nodeId) as NodeEntry;
  }

  // ---- the tick ----

  /** One tick: health, catalog, reconcile, store sync, publish. Ticks never overlap. */
  tick(): Promise<void> {
    this.ticking ??= this.runTick().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async runTick(): Promise<void> {
    if (this.stopped) return;
    const leader = this.leadership.isLeader();
    try {
      if (leader && (this.phaseValue === 'settling' || this.phaseValue === 'active')) {
        for (const t of this.nodes.checkHealth(this.clock.now(), this.options.config.timing)) this.healthChanged(t.nodeId, t.from, t.to);
        this.checkSettled();
      } else if (!leader) {
        await this.refreshStandby();
      }
      await this.catalog.poll();
      // Keys created or revoked through the catalog API reach routers with the next snapshot.
      if (leader) await this.keys.poll();
      // Routers that reach a standby report their use to it, and it writes that to the store:
      // the leader reads it back now and then, so idleness is judged on every router's reports.
      if (leader && this.phaseValue === 'active' && ++this.ticks % USAGE_READ_EVERY_TICKS === 0) {
        this.usage.merge(await this.options.store.replicas.listUsage());
      }
    } catch (error) {
      this.log.warn({ err: error }, 'tick: store read failed');
    }
    if (leader) await this.reconciler.pass();
    await this.persister.flush({ nodes: leader && this.phaseValue !== 'loading', replicas: leader && this.phaseValue !== 'loading' });
    this.publisher.refresh();
  }

  private healthChanged(nodeId: string, from: NodeState, to: NodeState): void {
    if (to === 'lost') {
      this.log.warn({ nodeId, from }, 'node lost: its replicas count as gone');
      this.recordEvent({ kind: 'lost', nodeId, reason: `no heartbeat for ${this.options.config.timing.lostAfterMs} ms` });
    } else if (to === 'unreachable') {
      this.log.warn({ nodeId }, 'node unreachable: no new placements, its endpoints suspect');
    }
  }

  private async refreshStandby(): Promise<void> {
    const [nodes, replicas] = await Promise.all([this.options.store.nodes.list(), this.options.store.replicas.list()]);
    if (this.leadership.isLeader()) return;
    this.nodes.loadFromStore(nodes, 0);
    this.replicas.loadFromStore(replicas);
  }

  private nodeChanged(change: NodeChange): void {
    this.publisher.schedule();
    if (change.kind === 'registered' || (change.kind === 'state' && change.to === 'healthy')) this.bumpCapacity();
    if (change.kind === 'registered' || change.kind === 'state' || change.kind === 'cordon') this.requestPass();
  }

  private bumpCapacity(): void {
    this.capacity += 1;
  }

  /** A reconcile pass soon (coalesced), when leading and settled. */
  requestPass(): void {
    if (this.passTimer || this.phaseValue !== 'active' || this.stopped) return;
    this.passTimer = setTimeout(() => {
      this.passTimer = undefined;
      void this.reconciler.pass();
    }, 10);
    this.passTimer.unref();
  }

  private recordEvent(e: Parameters<Store['events']['record']>[0]): void {
    this.options.store.events.record({ ...e, time: e.time ?? this.clock.now() }).catch((error: unknown) => this.log.debug({ err: error, kind: e.kind }, 'store: event not recorded'));
  }
}
