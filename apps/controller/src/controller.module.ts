import { Inject, Injectable, Module, type BeforeApplicationShutdown, type DynamicModule, type INestApplication, type OnApplicationShutdown } from '@nestjs/common';
import type { Clock } from '@llmgw/domain';
import { grpcSecurity } from '@llmgw/config';
import { ObservabilityModule, problemFilterProvider, ReadinessService, type Logger, type MetricsRegistry } from '@llmgw/observability';
import { openStore, redactDatabaseUrl, type Store } from '@llmgw/store';
import { grpcServerCredentials } from '@llmgw/tls';
import { AdminController, ADMIN_SERVICE } from './admin/admin.controller';
import { LEADER_FORWARDER, LeaderForwarder } from './admin/leader.forwarder';
import { ADMIN_TOKENS, AdminGuard } from './admin/admin.guard';
import { AdminService } from './admin/admin.service';
import { CONTROLLER_CONFIG, type ControllerConfig } from './config/controller.config';
import { ControlPlane } from './control-plane.service';
import { cryptoReplicaIds, REPLICA_IDS, type ReplicaIds } from './reconcile/replica-ids';
import { callAuthInterceptor, GrpcCallAuthenticator } from './grpc/grpc-auth';
import type { NestMicroservice } from '@nestjs/microservices';
import { AGENT_CONNECT, AgentGrpcController, ROUTER_CALLS, RouterGrpcController } from './grpc/grpc.controllers';
import { GrpcExceptionFilter } from './grpc/grpc-errors';
import { ControllerGrpcTransport, freeTcpPort } from './grpc/grpc.transport';

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
const STORE = Symbol('llmgw.controller.store');

/**
 * Stops the control plane (flush, close agent streams) before Nest closes the gRPC port, then
 * releases the lease and closes a store the app opened once the port is closed.
 */
@Injectable()
class ControlPlaneLifecycle implements BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(
    @Inject(CONTROL_PLANE) private readonly plane: ControlPlane,
    @Inject(STORE) private readonly store: { store: Store; owned: boolean },
  ) {}

  async beforeApplicationShutdown(): Promise<void> {
    await this.plane.stop();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.plane.release();
    if (this.store.owned) await this.store.store.close();
  }
}

/**
 * Makes the controller app hybrid: AgentService and RouterService on Nest's gRPC transport
 * (`@nestjs/microservices`), in the app's lifecycle, with the credential check on every call and
 * the one gRPC exception filter. Starts it and returns it (its `port` is the bound one). A port
 * that cannot be bound closes the app (releasing a lease it took) and rejects.
 */
export async function serveControllerGrpc(app: INestApplication, config: ControllerConfig, logger: Logger): Promise<ControllerGrpcTransport> {
  const transport = new ControllerGrpcTransport({
    host: config.host,
    port: config.grpcPort === 0 ? await freeTcpPort(config.host) : config.grpcPort,
    credentials: grpcServerCredentials(config.grpc),
    interceptors: [callAuthInterceptor(new GrpcCallAuthenticator({ agent: config.joinToken, router: config.routerToken }), logger)],
    closeGraceMs: 1_000,
  });
  // Deferred, so the handlers Nest builds when it starts the transport see the filter.
  // The app's own init hooks have run: starting the microservice must not run them again.
  const grpc = app.connectMicroservice({ strategy: transport }, { inheritAppConfig: false, deferInitialization: true });
  (grpc as unknown as NestMicroservice).setIsInitHookCalled(true);
  grpc.useGlobalFilters(new GrpcExceptionFilter(logger));
  try {
    await app.startAllMicroservices();
  } catch (error) {
    await app.close();
    throw new Error(`gRPC cannot listen on ${config.host}:${transport.port} (LLMGW_CONTROLLER_GRPC_PORT): ${error instanceof Error ? error.message : String(error)}`);
  }
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const detail = grpcSecurity(config.grpc, 'server');
  const { security } = detail;
  logger.info({ grpcPort: transport.port, grpcAddress: `${host}:${transport.port}`, security }, `llmgw-controller gRPC listening on ${host}:${transport.port} (${security})`);
  if (config.grpc.insecure) logger.warn('LLMGW_GRPC_INSECURE: gRPC runs in plaintext; tokens, catalog env values and endpoint lists cross the network unencrypted');
  app.get(ReadinessService).register('grpc', () => ({ ready: true, detail }));
  return transport;
}

/** Root module of llmgw-controller (desired vs actual state of the fleet: reconciler, placement, agent and router streams). Wiring only. */
@Module({})
export class ControllerModule {
  static forRoot(options: ControllerModuleOptions): DynamicModule {
    const { config, logger } = options;
    return {
      module: ControllerModule,
      imports: [ObservabilityModule.forRoot({ logger, registry: options.registry })],
      controllers: [AdminController, AgentGrpcController, RouterGrpcController],
      providers: [
        { provide: CONTROLLER_CONFIG, useValue: config },
        { provide: REPLICA_IDS, useValue: options.replicaIds ?? cryptoReplicaIds },
        {
          provide: STORE,
          useFactory: async () => {
            if (options.store) return { store: options.store, owned: false };
            const store = await openStore(config.databaseUrl);
            logger.info({ database: redactDatabaseUrl(config.databaseUrl), dialect: store.dialect, migrations: store.appliedMigrations }, 'store open');
            return { store, owned: true };
          },
        },
        {
          provide: CONTROL_PLANE,
          inject: [STORE, ReadinessService, REPLICA_IDS],
          useFactory: async (held: { store: Store; owned: boolean }, readiness: ReadinessService, replicaIds: ReplicaIds) => {
            const plane = new ControlPlane({ config, store: held.store, logger, registry: options.registry, replicaIds, ...(options.clock ? { clock: options.clock } : {}) });
            await plane.start();
            readiness.register('control-plane.service', () =>
              plane.publisher.current() !== undefined ? { ready: true } : { ready: false, reason: 'cluster state not loaded yet' },
            );
            return plane;
          },
        },
        { provide: AGENT_CONNECT, inject: [CONTROL_PLANE], useFactory: (plane: ControlPlane) => plane.agentCalls },
        { provide: ROUTER_CALLS, inject: [CONTROL_PLANE], useFactory: (plane: ControlPlane) => plane.routerCalls },
        {
          provide: LEADER_FORWARDER,
          inject: [CONTROL_PLANE],
          useFactory: (plane: ControlPlane) => new LeaderForwarder({ isLeader: () => plane.leadership.isLeader(), leaderAdminUrl: () => plane.leadership.leaderAdminUrl() }, plane.controllerId),
        },
        {
          provide: ADMIN_SERVICE,
          inject: [CONTROL_PLANE, STORE],
          useFactory: (plane: ControlPlane, held: { store: Store }) => new AdminService(plane, plane.commands, held.store.events, config.timing.commandTimeoutMs),
        },
        ControlPlaneLifecycle,
        { provide: ADMIN_TOKENS, inject: [STORE], useFactory: (held: { store: Store }) => held.store.adminTokens },
        AdminGuard,
        // App-wide, so a malformed or oversized body and an unknown route or method are problem+json too.
        problemFilterProvider({ context: 'AdminApi', realm: 'llmgw-controller-admin' }),
      ],
      exports: [CONTROLLER_CONFIG, CONTROL_PLANE],
    };
  }
}
