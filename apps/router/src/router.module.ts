import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { ROUTER_CONFIG, type RouterConfig } from './config/router.config';
import { RouterCore } from './router.core';
import { RouterRuntimeService } from './router-runtime.service';
import type { UsageSink } from './usage/usage.sink';

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
          provide: RouterCore,
          useFactory: () => new RouterCore({ config: options.config, logger: options.logger, registry: options.registry, usageSink: options.usageSink }),
        },
        RouterRuntimeService,
      ],
      exports: [ROUTER_CONFIG, RouterCore],
    };
  }
}
