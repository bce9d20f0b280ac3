import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, ReadinessService, type Logger } from '@llmgw/observability';
import { grpcSecurity } from '@llmgw/config';
import type { Registry } from 'prom-client';
import { ROUTER_CONFIG, type RouterConfig } from './config/router.config';
import { RouterCore } from './router.core';
import { RouterRuntimeService } from './router-runtime.service';
import type { UsageSink } from './usage/usage.sink';
import { CONTROLLER_CLIENTS, controllerClientFactory, type ControllerClientFactory } from './watch/controller.clients';

/** What llmgw-router is built from: its validated config, its logger and its metrics registry. */
export interface RouterModuleOptions {
  config: RouterConfig;
  logger: Logger;
  registry: Registry;
  /** Replaces the gRPC usage reports (in-process controller, tests). */
  usageSink?: UsageSink;
}

/** Root module of llmgw-router (the OpenAI-compatible API in front of the engines). Wiring only. */
@Module({})
export class RouterModule {
  static forRoot(options: RouterModuleOptions): DynamicModule {
    return {
      module: RouterModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      providers: [
        { provide: ROUTER_CONFIG, useValue: options.config },
        {
          provide: CONTROLLER_CLIENTS,
          inject: [ReadinessService],
          useFactory: (readiness: ReadinessService): ControllerClientFactory | undefined => {
            const { grpc, controllerAddresses } = options.config;
            if (controllerAddresses === undefined) return undefined;
            if (grpc.insecure) options.logger.warn('LLMGW_GRPC_INSECURE: the connection to the controller is plaintext; the router token, API key hashes and endpoint lists cross the network unencrypted');
            const detail = grpcSecurity(grpc, 'client');
            readiness.register('grpc', () => ({ ready: true, detail }));
            return controllerClientFactory(grpc);
          },
        },
        {
          provide: RouterCore,
          inject: [CONTROLLER_CLIENTS],
          useFactory: (createClient: ControllerClientFactory | undefined) =>
            new RouterCore({ config: options.config, logger: options.logger, registry: options.registry, usageSink: options.usageSink, ...(createClient && { createClient }) }),
        },
        RouterRuntimeService,
      ],
      exports: [ROUTER_CONFIG, RouterCore],
    };
  }
}
