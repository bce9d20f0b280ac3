import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { ROUTER_CONFIG, type RouterConfig } from './config/router.config';

/** What llmgw-router is built from: its validated config, its logger and its metrics registry. */
export interface RouterModuleOptions {
  config: RouterConfig;
  logger: Logger;
  registry: Registry;
}

/** Root module of llmgw-router (the OpenAI-compatible API in front of the engines). Wiring only. */
@Module({})
export class RouterModule {
  static forRoot(options: RouterModuleOptions): DynamicModule {
    return {
      module: RouterModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      providers: [{ provide: ROUTER_CONFIG, useValue: options.config }],
      exports: [ROUTER_CONFIG],
    };
  }
}
