// The controller's parts as Nest providers, one job each, and the root that starts them in
// order (ControlPlane). Every factory gives a part only the narrow ports it declares.
import type { Provider } from '@nestjs/common';
import { systemClock, type Clock } from '@llmgw/domain';
import { ReadinessService, type Logger, type MetricsRegistry } from '@llmgw/observability';
import { openStore, redactDatabaseUrl, type Store } from '@llmgw/store';
import { LEADER_FORWARDER, LeaderForwarder } from './admin/leader.forwarder';
import { ADMIN_SERVICE } from './admin/admin.controller';
import { AdminService, NODE_ADMIN, type NodeAdmin } from './admin/admin.service';
import { CatalogReloader } from './catalog/catalog.reloader';
import { CONTROLLER_CONFIG, type ControllerConfig } from './config/controller.config';
import { ControlPlane } from './control-plane.service';
import { GrpcAgentCommands } from './grpc/agent-commands.adapter';
import { AGENT_STREAM_HANDLER, AgentConnect, type AgentStreamHandler } from './grpc/agent.service';
import { AgentSessions } from './grpc/agent.sessions';
import { AGENT_CONNECT, ROUTER_CALLS } from './grpc/grpc.controllers';
import { RouterCalls } from './grpc/router.calls';
import { LeadershipService } from './leadership/leadership.service';
import { TermService } from './leadership/term.service';
import { registerClusterMetrics, type ControllerMetrics } from './metrics/cluster.collector';
import { AGENT_COMMANDS, type AgentCommands } from './nodes/agent-commands.port';
import { AgentReportsHandler } from './nodes/agent-reports.handler';
import { NodeAdminService } from './nodes/node-admin.service';
import { NodeCredentialService } from './nodes/node-credential.service';
import { NodeIdentities } from './nodes/node-identity.service';
import { NodeRegistry } from './nodes/node.registry';
import { EndpointPublisher } from './publishing/endpoint.publisher';
import { KeySetReader } from './publishing/key-set.reader';
import { Reconciler } from './reconcile/replica.reconciler';
import { cryptoReplicaIds, REPLICA_IDS, type ReplicaIds } from './reconcile/replica-ids';
import { ReplicaRegistry } from './replicas/replica.registry';
import { eventRecorder, RECORD_EVENT, type RecordEvent } from './store/event.recorder';
import { StatePersister } from './store/state.persister';
import { TickLoop } from './tick/tick.loop';
import { UsageTracker } from './usage/usage.tracker';

/** What llmgw-controller is built from: its validated config, its logger and its metrics registry. */
export interface ControllerModuleOptions {
  config: ControllerConfig;
  logger: Logger;
  registry: MetricsRegistry;
  /** An already open store (tests, benchmarks); the app then leaves closing it to the caller. */
  store?: Store;
  clock?: Clock;
  /** Ids of new replicas; random ones (cryptoReplicaIds) unless given. */
  replicaIds?: ReplicaIds;
}

/** Injection token of the running {@link ControlPlane}. */
export const CONTROL_PLANE = Symbol('llmgw.controller.control-plane');
/** Injection token of the store the controller runs on, as a {@link HeldStore}. */
export const CONTROLLER_STORE = Symbol('llmgw.controller.store');
const CLOCK = Symbol('llmgw.controller.clock');
const METRICS = Symbol('llmgw.controller.metrics');

/** The store the controller runs on; `owned` when the app opened it (and closes it at shutdown). */
export interface HeldStore {
  readonly store: Store;
  readonly owned: boolean;
}

/** The controller's providers: shared state, the parts, the gRPC and admin handlers, and the root. */
export function controlPlaneProviders(options: ControllerModuleOptions): Provider[] {
  const { config, logger } = options;
  const timing = config.timing;
  return [
    { provide: CONTROLLER_CONFIG, useValue: config },
    { provide: CLOCK, useValue: options.clock ?? systemClock },
    { provide: REPLICA_IDS, useValue: options.replicaIds ?? cryptoReplicaIds },
    {
      provide: CONTROLLER_STORE,
      useFactory: async (): Promise<HeldStore> => {
        if (options.store) return { store: options.store, owned: false };
        const store = await openStore(config.databaseUrl);
        logger.info({ database: redactDatabaseUrl(config.databaseUrl), dialect: store.dialect, migrations: store.appliedMigrations }, 'store open');
        return { store, owned: true };
      },
    },
    {
      provide: RECORD_EVENT,
      inject: [CONTROLLER_STORE, CLOCK],
      useFactory: (held: HeldStore, clock: Clock): RecordEvent => eventRecorder(held.store.events, clock, logger.child({ context: 'ControlPlane' })),
    },

    // ---- state the parts share, and the edges to agents, the store and the lease ----
    { provide: NodeRegistry, useFactory: () => new NodeRegistry() },
    { provide: ReplicaRegistry, useFactory: () => new ReplicaRegistry() },
    { provide: AgentSessions, useFactory: () => new AgentSessions(logger.child({ context: 'AgentSessions' })) },
    { provide: AGENT_COMMANDS, inject: [AgentSessions], useFactory: (sessions: AgentSessions): AgentCommands => new GrpcAgentCommands(sessions) },
    { provide: UsageTracker, inject: [ReplicaRegistry], useFactory: (replicas: ReplicaRegistry) => new UsageTracker(replicas) },
    { provide: CatalogReloader, inject: [CONTROLLER_STORE], useFactory: (held: HeldStore) => new CatalogReloader(held.store.catalog, logger.child({ context: 'CatalogReloader' })) },
    { provide: KeySetReader, inject: [CONTROLLER_STORE], useFactory: (held: HeldStore) => new KeySetReader(held.store.apiKeys) },
    {
      provide: NodeIdentities,
      inject: [CONTROLLER_STORE, CLOCK],
      useFactory: (held: HeldStore, clock: Clock) => new NodeIdentities(new NodeCredentialService(held.store.nodes, clock)),
    },
    {
      provide: LeadershipService,
      inject: [CONTROLLER_STORE, CLOCK],
      useFactory: (held: HeldStore, clock: Clock) =>
        new LeadershipService(config.lease, held.store.leases, { address: config.advertiseAddress, adminUrl: config.advertiseAdminUrl }, clock, undefined, logger),
    },
    {
      provide: StatePersister,
      inject: [CONTROLLER_STORE, LeadershipService, NodeRegistry, ReplicaRegistry, UsageTracker, NodeIdentities],
      useFactory: (held: HeldStore, leadership: LeadershipService, nodes: NodeRegistry, replicas: ReplicaRegistry, usage: UsageTracker, identities: NodeIdentities) =>
        new StatePersister(held.store, nodes, replicas, usage, () => leadership.fence(), logger, (id) => identities.isForgetting(id)),
    },

    // ---- the parts ----
    // Publishing: snapshots of the endpoints for routers.
    {
      provide: EndpointPublisher,
      inject: [NodeRegistry, ReplicaRegistry, CatalogReloader, KeySetReader],
      useFactory: (nodes: NodeRegistry, replicas: ReplicaRegistry, catalog: CatalogReloader, keys: KeySetReader) =>
        new EndpointPublisher(
          { nodes: () => nodes.snapshot(), replicas: () => replicas.values(), catalog: () => catalog.current(), keys: () => keys.current() },
          logger.child({ context: 'EndpointPublisher' }),
        ),
    },
    // Leadership term: load, settle, act; standby when the lead is lost.
    {
      provide: TermService,
      inject: [CONTROLLER_STORE, CLOCK, LeadershipService, NodeRegistry, ReplicaRegistry, EndpointPublisher, AGENT_COMMANDS],
      useFactory: (held: HeldStore, clock: Clock, leadership: LeadershipService, nodes: NodeRegistry, replicas: ReplicaRegistry, publisher: EndpointPublisher, commands: AgentCommands) => {
        const term = new TermService({ clock, timing, store: held.store, leadership, nodes, replicas, publishing: publisher, commands }, logger);
        leadership.listen(term);
        return term;
      },
    },
    // Reconciling: desired against actual, through the agents' commands.
    {
      provide: Reconciler,
      inject: [CONTROLLER_STORE, CLOCK, LeadershipService, TermService, NodeRegistry, ReplicaRegistry, CatalogReloader, AGENT_COMMANDS, REPLICA_IDS],
      useFactory: (
        held: HeldStore,
        clock: Clock,
        leadership: LeadershipService,
        term: TermService,
        nodes: NodeRegistry,
        replicas: ReplicaRegistry,
        catalog: CatalogReloader,
        commands: AgentCommands,
        ids: ReplicaIds,
      ) => {
        const reconciler = new Reconciler(
          {
            clock,
            timing: { backoffMinMs: timing.backoffMinMs, backoffMaxMs: timing.backoffMaxMs, maxRestarts: timing.maxRestarts, commandGraceMs: Math.max(2 * timing.heartbeatIntervalMs, 2 * timing.tickMs) },
            nodes,
            replicas,
            commands,
            ids,
            store: held.store,
            catalog: () => catalog.current(),
            mayAct: () => term.mayAct(),
            fence: () => leadership.fence(),
          },
          logger,
        );
        // A term starts from the store: what the last one learnt is forgotten when it begins or ends.
        term.onPhase((phase) => (phase === 'loading' || phase === 'standby') && reconciler.reset());
        return reconciler;
      },
    },
    // The tick loop: health, settle check, polls, passes, flushes, publishes.
    {
      provide: TickLoop,
      inject: [CONTROLLER_STORE, CLOCK, RECORD_EVENT, LeadershipService, TermService, NodeRegistry, CatalogReloader, KeySetReader, UsageTracker, Reconciler, StatePersister, EndpointPublisher],
      useFactory: (
        held: HeldStore,
        clock: Clock,
        recordEvent: RecordEvent,
        leadership: LeadershipService,
        term: TermService,
        nodes: NodeRegistry,
        catalog: CatalogReloader,
        keys: KeySetReader,
        usage: UsageTracker,
        reconciler: Reconciler,
        persister: StatePersister,
        publisher: EndpointPublisher,
      ) => {
        const loop = new TickLoop({ clock, timing, leadership, term, nodes, catalog, keys, usage, store: held.store, reconciler, persister, publisher, recordEvent }, logger);
        // Settled: act now rather than at the next tick.
        term.onPhase((phase) => phase === 'active' && loop.requestPass());
        return loop;
      },
    },
    // Node admin: cordon, drain, uncordon, forget.
    {
      provide: NODE_ADMIN,
      inject: [CONTROLLER_STORE, RECORD_EVENT, NodeRegistry, AGENT_COMMANDS, NodeIdentities, StatePersister, Reconciler, TickLoop, TermService],
      useFactory: (
        held: HeldStore,
        recordEvent: RecordEvent,
        nodes: NodeRegistry,
        commands: AgentCommands,
        identities: NodeIdentities,
        persister: StatePersister,
        reconciler: Reconciler,
        loop: TickLoop,
        term: TermService,
      ): NodeAdmin =>
        new NodeAdminService(
          {
            nodes,
            store: held.store,
            commands,
            identities,
            persister,
            capacityChanged: () => reconciler.capacityChanged(),
            requestPass: () => loop.requestPass(),
            recordEvent,
            leads: () => term.leads(),
          },
          logger,
        ),
    },
    // Agent reports: registration, heartbeats, replica status, adoption.
    {
      provide: AGENT_STREAM_HANDLER,
      inject: [CLOCK, RECORD_EVENT, LeadershipService, TermService, NodeIdentities, NodeRegistry, ReplicaRegistry, CatalogReloader, Reconciler, TickLoop],
      useFactory: (
        clock: Clock,
        recordEvent: RecordEvent,
        leadership: LeadershipService,
        term: TermService,
        identities: NodeIdentities,
        nodes: NodeRegistry,
        replicas: ReplicaRegistry,
        catalog: CatalogReloader,
        reconciler: Reconciler,
        loop: TickLoop,
      ): AgentStreamHandler =>
        new AgentReportsHandler(
          { clock, heartbeatIntervalMs: timing.heartbeatIntervalMs, leadership, term, identities, nodes, replicas, catalog, reconciler, requestPass: () => loop.requestPass(), recordEvent },
          logger,
        ),
    },
    // Metrics: computed at scrape time from the parts; told of every pass and publish.
    {
      provide: METRICS,
      inject: [CLOCK, NodeRegistry, ReplicaRegistry, Reconciler, LeadershipService, CatalogReloader, EndpointPublisher, AgentSessions],
      useFactory: (
        clock: Clock,
        nodes: NodeRegistry,
        replicas: ReplicaRegistry,
        reconciler: Reconciler,
        leadership: LeadershipService,
        catalog: CatalogReloader,
        publisher: EndpointPublisher,
        sessions: AgentSessions,
      ): ControllerMetrics => {
        const metrics = registerClusterMetrics(options.registry, {
          clock,
          nodes: () => nodes.snapshot(),
          replicas: () => replicas.snapshot(),
          unplaceable: () => reconciler.unplaceable,
          isLeader: () => leadership.isLeader(),
          catalogRevision: () => catalog.current()?.revision,
          rejectedCatalogRevision: () => catalog.rejected()?.revision,
          snapshotRevision: () => publisher.current()?.revision,
          watchers: () => publisher.sinkCount,
          agentStreams: () => sessions.size,
          commandsSent: () => sessions.sent,
        });
        reconciler.onPass((seconds) => metrics.observePass(seconds));
        publisher.onPublished((seconds) => metrics.observePublish(seconds));
        return metrics;
      },
    },

    // ---- what the gRPC and admin controllers hand calls to ----
    {
      provide: AGENT_CONNECT,
      inject: [AGENT_STREAM_HANDLER, AgentSessions],
      useFactory: (handler: AgentStreamHandler, sessions: AgentSessions) => new AgentConnect(handler, sessions, logger),
    },
    {
      provide: ROUTER_CALLS,
      inject: [CONTROLLER_STORE, CLOCK, METRICS, TermService, EndpointPublisher, UsageTracker],
      useFactory: (held: HeldStore, clock: Clock, metrics: ControllerMetrics, term: TermService, publisher: EndpointPublisher, usage: UsageTracker) =>
        new RouterCalls(
          publisher,
          usage,
          { clock, futureUsageClamped: (n) => metrics.countFutureUsage(n), admit: () => term.admit(), writeKeyUsage: (rows) => held.store.keyUsage.add(rows) },
          logger,
        ),
    },
    {
      provide: LEADER_FORWARDER,
      inject: [LeadershipService],
      useFactory: (leadership: LeadershipService) => new LeaderForwarder({ isLeader: () => leadership.isLeader(), leaderAdminUrl: () => leadership.leaderAdminUrl() }, leadership.ownerId),
    },
    {
      provide: ADMIN_SERVICE,
      inject: [CONTROLLER_STORE, CLOCK, NodeRegistry, ReplicaRegistry, CatalogReloader, Reconciler, LeadershipService, TermService, EndpointPublisher, NODE_ADMIN, AGENT_COMMANDS],
      useFactory: (
        held: HeldStore,
        clock: Clock,
        nodes: NodeRegistry,
        replicas: ReplicaRegistry,
        catalog: CatalogReloader,
        reconciler: Reconciler,
        leadership: LeadershipService,
        term: TermService,
        publisher: EndpointPublisher,
        nodeAdmin: NodeAdmin,
        commands: AgentCommands,
      ) => new AdminService({ clock, nodes, replicas, catalog, reconciler, leadership, term, publisher, nodeAdmin, commands, events: held.store.events, commandTimeoutMs: timing.commandTimeoutMs }),
    },

    // ---- the root: starts the parts in order once every one is built (metrics included, so
    // that the first pass and publish are observed) ----
    {
      provide: CONTROL_PLANE,
      inject: [ReadinessService, METRICS, CatalogReloader, LeadershipService, TermService, NodeRegistry, ReplicaRegistry, EndpointPublisher, Reconciler, TickLoop, StatePersister, AGENT_COMMANDS],
      useFactory: async (
        readiness: ReadinessService,
        _metrics: ControllerMetrics,
        catalog: CatalogReloader,
        leadership: LeadershipService,
        term: TermService,
        nodes: NodeRegistry,
        replicas: ReplicaRegistry,
        publisher: EndpointPublisher,
        reconciler: Reconciler,
        loop: TickLoop,
        persister: StatePersister,
        commands: AgentCommands,
      ) => {
        const plane = new ControlPlane({ config, catalog, leadership, term, nodes, replicas, publisher, reconciler, loop, persister, commands }, logger);
        await plane.start();
        readiness.register('control-plane.service', () => (publisher.current() !== undefined ? { ready: true } : { ready: false, reason: 'cluster state not loaded yet' }));
        return plane;
      },
    },
  ];
}
