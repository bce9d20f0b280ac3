import { Inject, Injectable, type OnApplicationShutdown, type Provider } from '@nestjs/common';
import { ReadinessService, ROOT_LOGGER, type Logger } from '@llmgw/observability';
import { openStore, redactDatabaseUrl, type Store } from '@llmgw/store';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';

/** Injection token of the open {@link Store}. */
export const CATALOG_STORE = Symbol('llmgw.catalog-store');

/** Opens the store at boot (applying pending migrations); a store that cannot be opened stops the boot. */
export const catalogStoreProvider: Provider = {
  provide: CATALOG_STORE,
  inject: [CATALOG_CONFIG, ROOT_LOGGER],
  useFactory: async (config: CatalogConfig, logger: Logger): Promise<Store> => {
    const store = await openStore(config.databaseUrl);
    logger.info({ context: 'CatalogStore', database: redactDatabaseUrl(config.databaseUrl), migrations: store.appliedMigrations }, 'store open');
    return store;
  },
};

/** Ready while the store answers; closes it when the app shuts down. */
@Injectable()
export class CatalogStoreLifecycle implements OnApplicationShutdown {
  constructor(@Inject(CATALOG_STORE) private readonly store: Store, readiness: ReadinessService) {
    readiness.register('store', async () => {
      await this.store.catalog.currentRevision();
      return true;
    });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
