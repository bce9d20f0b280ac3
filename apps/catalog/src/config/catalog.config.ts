import { DATABASE_ENV, env, SHARED_ENV, sharedConfig, type DeepReadonly } from '@llmgw/config';
import { z } from 'zod';

/**
 * Every setting llmgw-catalog reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start.
 */
export const catalogConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics); 0 = any free port. */
    LLMGW_CATALOG_PORT: env.port({ default: 8083 }),
    ...DATABASE_ENV,
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_CATALOG_PORT,
    /** Store connection; undefined = SQLite in the data dir. */
    databaseUrl: e.LLMGW_DATABASE_URL,
  }));

/** llmgw-catalog's configuration: frozen, typed, in the names code uses. */
export type CatalogConfig = DeepReadonly<z.output<typeof catalogConfigSchema>>;

/** Injection token of {@link CatalogConfig}. */
export const CATALOG_CONFIG = Symbol('llmgw.catalog-config');
