import { Inject, Injectable, Module, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import type { Clock } from '@llmgw/domain';
import { ObservabilityModule, problemFilterProvider, ReadinessService, type Logger } from '@llmgw/observability';
import { openStore, redactDatabaseUrl, type Store } from '@llmgw/store';
import type { Registry } from 'prom-client';
import { AdminController, ADMIN_SERVICE } from './admin/admin.controller';
import { LEADER_FORWARDER, LeaderForwarder } from './admin/leader.forwarder';
import { ADMIN_TOKENS, AdminGuard } from './admin/admin.guard';
import { AdminService } from './admin/admin.service';
import { CONTROLLER_CONFIG, type ControllerConfig } from './config/controller.config';
import { ControlPlane } from './control-plane.service';

/** What llmgw-controller is built from: its validated config, its logger and its metrics registry. */
export interface ControllerModuleOptions {
  config: ControllerConfig;
  logger: Logger;
  registry: Registry;
  /** An already open store (tests, benchmarks); the app then leaves closing it to the caller. */
  store?: Store;
  clock?: Clock;
}

/** Injection token of the running {@link ControlPlane}. */
export const CONTROL_PLANE = Symbol('llmgw.controller.control-plane');
const STORE = Symbol('llmgw.controller.store');

/** Stops the control plane (flush, close streams, release the lease) and closes a store the app opened. */
@Injectable()
class ControlPlaneLifecycle implements OnApplicationShutdown {
  constructor(
    @Inject(CONTROL_PLANE) private readonly plane: ControlPlane,
    @Inject(STORE) private readonly store: { store: Store; owned: boolean },
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.plane.stop();
    if (this.store.owned) await this.store.store.close();
  }
}

/** Root module of llmgw-controller (desired vs actual state of the fleet: reconciler, placement, agent and router streams). Wiring only. */
@Module({})
export class ControllerModule {
  static forRoot(options: ControllerModuleOptions): DynamicModule {
    const { config, logger } = options;
    return {
      module: ControllerModule,
      imports: [ObservabilityModule.forRoot({ logger, registry: options.registry })],
      controllers: [AdminController],
      providers: [
        { provide: CONTROLLER_CONFIG, useValue: config },
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
          inject: [STORE, ReadinessService],
          useFactory: async (held: { store: Store; owned: boolean }, readiness: ReadinessService) => {
            const plane = new ControlPlane({ config, store: held.store, logger, registry: options.registry, ...(options.clock ? { clock: options.clock } : {}) });
            const port = await plane.start();
            const host = config.host.includes(':') ? `[${config.host}]` : config.host;
            logger.info({ grpcPort: port, grpcAddress: `${host}:${port}` }, `llmgw-controller gRPC listening on ${host}:${port}`);
            readiness.register('control-plane.service', () =>
              plane.publisher.current() !== undefined ? { ready: true } : { ready: false, reason: 'cluster state not loaded yet' },
            );
            return plane;
          },
        },
        {
          provide: LEADER_FORWARDER,
          inject: [CONTROL_PLANE],
          useFactory: (plane: ControlPlane) => new LeaderForwarder({ isLeader: () => plane.leadership.isLeader(), leaderAdminUrl: () => plane.leadership.leaderAdminUrl() }, plane.controllerId),
        },
        {
          provide: ADMIN_SERVICE,
          inject: [CONTROL_PLANE, STORE],
          useFactory: (plane: ControlPlane, held: { store: Store }) => new AdminService(plane, held.store.events, config.timing.commandTimeoutMs),
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
