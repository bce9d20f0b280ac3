import { Module, type DynamicModule } from '@nestjs/common';
import { CatalogError } from '@llmgw/catalog';
import { ObservabilityModule, problemFilterProvider, ProblemError, ROOT_LOGGER, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { AdminTokenGuard } from './api/admin-token.guard';
import { randomBytes } from 'node:crypto';
import { CatalogApiController } from './api/catalog-api.controller';
import { CatalogApiService, type CatalogApiStore } from './api/catalog-api.service';
import { DocsController } from './api/docs.controller';
import { CATALOG_CONFIG, type CatalogConfig } from './config/catalog.config';
import { CATALOG_STORE, catalogStoreProvider, CatalogStoreLifecycle } from './store/catalog-store.provider';
import { KeysApiController } from './keys/keys-api.controller';
import { AdminTokensController, SECRET_BYTES } from './tokens/admin-tokens.controller';
import { USAGE_CLOCK, UsageController } from './usage/usage.controller';
import { KeysApiService, type KeysApiStore } from './keys/keys-api.service';
import { systemClock } from '@llmgw/domain';

/** What llmgw-catalog is built from: its validated config, its logger and its metrics registry. */
export interface CatalogModuleOptions {
  config: CatalogConfig;
  logger: Logger;
  registry: Registry;
}

/**
 * Root module of llmgw-catalog (the catalog REST API): the store, the API behind the admin
 * token, its OpenAPI document and docs page, and one problem+json error mapper. Wiring only.
 */
@Module({})
export class CatalogModule {
  static forRoot(options: CatalogModuleOptions): DynamicModule {
    return {
      module: CatalogModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      controllers: [CatalogApiController, KeysApiController, AdminTokensController, UsageController, DocsController],
      providers: [
        { provide: CATALOG_CONFIG, useValue: options.config },
        catalogStoreProvider,
        CatalogStoreLifecycle,
        AdminTokenGuard,
        {
          provide: CatalogApiService,
          inject: [CATALOG_STORE, ROOT_LOGGER],
          useFactory: (store: CatalogApiStore, logger: Logger) => new CatalogApiService(store, logger),
        },
        { provide: SECRET_BYTES, useValue: randomBytes },
        { provide: USAGE_CLOCK, useValue: systemClock },
        {
          provide: KeysApiService,
          inject: [CATALOG_STORE, SECRET_BYTES],
          useFactory: (store: KeysApiStore, bytes: (n: number) => Buffer) => new KeysApiService(store, bytes, systemClock),
        },
        problemFilterProvider({
          context: 'CatalogApi',
          realm: 'llmgw-catalog',
          refine: (error) => (error instanceof CatalogError ? new ProblemError('invalid-catalog', error.message.split('\n')[0], error.problems) : undefined),
        }),
      ],
      exports: [CATALOG_CONFIG],
    };
  }
}
