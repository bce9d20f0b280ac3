import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { CATALOG_CONFIG, type CatalogConfig } from './config/catalog.config';

/** What llmgw-catalog is built from: its validated config, its logger and its metrics registry. */
export interface CatalogModuleOptions {
  config: CatalogConfig;
  logger: Logger;
  registry: Registry;
}

/** Root module of llmgw-catalog (the catalog REST API). Wiring only. */
@Module({})
export class CatalogModule {
  static forRoot(options: CatalogModuleOptions): DynamicModule {
    return {
      module: CatalogModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      providers: [{ provide: CATALOG_CONFIG, useValue: options.config }],
      exports: [CATALOG_CONFIG],
    };
  }
}
