import { Inject, Injectable, Module, type BeforeApplicationShutdown, type DynamicModule, type INestApplication, type OnApplicationShutdown } from '@nestjs/common';
import { grpcSecurity } from '@llmgw/config';
import { ObservabilityModule, problemFilterProvider, ReadinessService, type Logger } from '@llmgw/observability';
import { grpcServerCredentials } from '@llmgw/tls';
import { AdminController } from './admin/admin.controller';
import { ADMIN_TOKENS, AdminGuard } from './admin/admin.guard';
import { CONTROLLER_CONFIG, type ControllerConfig } from './config/controller.config';
import { CONTROL_PLANE, CONTROLLER_STORE, controlPlaneProviders, type ControllerModuleOptions, type HeldStore } from './control-plane.providers';
import type { ControlPlane } from './control-plane.service';
import { callAuthInterceptor, GrpcCallAuthenticator } from './grpc/grpc-auth';
import type { NestMicroservice } from '@nestjs/microservices';
import { AgentGrpcController, RouterGrpcController } from './grpc/grpc.controllers';
import { GrpcExceptionFilter } from './grpc/grpc-errors';
import { ControllerGrpcTransport, freeTcpPort } from './grpc/grpc.transport';

export { CONTROL_PLANE, CONTROLLER_STORE, type ControllerModuleOptions };

/**
 * Stops the control plane (flush, close agent streams) before Nest closes the gRPC port, then
 * releases the lease and closes a store the app opened once the port is closed.
 */
@Injectable()
class ControlPlaneLifecycle implements BeforeApplicationShutdown, OnApplicationShutdown {
  constructor(
    @Inject(CONTROL_PLANE) private readonly plane: ControlPlane,
    @Inject(CONTROLLER_STORE) private readonly store: HeldStore,
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
    const { logger } = options;
    return {
      module: ControllerModule,
      imports: [ObservabilityModule.forRoot({ logger, registry: options.registry })],
      controllers: [AdminController, AgentGrpcController, RouterGrpcController],
      providers: [
        ...controlPlaneProviders(options),
        ControlPlaneLifecycle,
        { provide: ADMIN_TOKENS, inject: [CONTROLLER_STORE], useFactory: (held: HeldStore) => held.store.adminTokens },
        AdminGuard,
        // App-wide, so a malformed or oversized body and an unknown route or method are problem+json too.
        problemFilterProvider({ context: 'AdminApi', realm: 'llmgw-controller-admin' }),
      ],
      exports: [CONTROLLER_CONFIG, CONTROL_PLANE],
    };
  }
}
