import { Global, Module, type DynamicModule } from '@nestjs/common';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { HealthController, METRICS_REGISTRY } from './health.controller';
import { ReadinessService } from './readiness.service';

/** Injection token of the process's root pino logger. */
export const ROOT_LOGGER = Symbol('llmgw.root-logger');

/** What {@link ObservabilityModule.forRoot} is given: the process's logger and metrics registry. */
export interface ObservabilityOptions {
  logger: Logger;
  registry: Registry;
}

/**
 * Health, readiness and metrics for one app: mounts /healthz, /readyz, /metrics and provides
 * ReadinessService, the root logger and the registry to every module (global).
 */
@Global()
@Module({})
export class ObservabilityModule {
  static forRoot(options: ObservabilityOptions): DynamicModule {
    return {
      module: ObservabilityModule,
      controllers: [HealthController],
      providers: [
        ReadinessService,
        { provide: ROOT_LOGGER, useValue: options.logger },
        { provide: METRICS_REGISTRY, useValue: options.registry },
      ],
      exports: [ReadinessService, ROOT_LOGGER, METRICS_REGISTRY],
    };
  }
}
