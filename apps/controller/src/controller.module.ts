import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { CONTROLLER_CONFIG, type ControllerConfig } from './config/controller.config';

/** What llmgw-controller is built from: its validated config, its logger and its metrics registry. */
export interface ControllerModuleOptions {
  config: ControllerConfig;
  logger: Logger;
  registry: Registry;
}

/** Root module of llmgw-controller (desired vs actual state of the fleet: reconciler, placement, agent and router streams). Wiring only. */
@Module({})
export class ControllerModule {
  static forRoot(options: ControllerModuleOptions): DynamicModule {
    return {
      module: ControllerModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      providers: [{ provide: CONTROLLER_CONFIG, useValue: options.config }],
      exports: [CONTROLLER_CONFIG],
    };
  }
}
