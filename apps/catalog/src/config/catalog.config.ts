import { join } from 'node:path';
import { CATALOG_DOCUMENT_LIMITS, parseSize } from '@llmgw/catalog';
import { DATABASE_ENV, env, envVar, SHARED_ENV, sharedConfig, type DeepReadonly, type EnvParse } from '@llmgw/config';
import { z } from 'zod';

/**
 * Largest request body an operator may allow: the catalog library's document size limit (4MiB; a
 * catalog of thousands of models fits in far less, and parsing more would hold the event loop).
 */
export const MAX_BODY_LIMIT_BYTES = CATALOG_DOCUMENT_LIMITS.maxBytes;

/** A byte size such as `1MiB`, `512KB` or `1048576`, at most {@link MAX_BODY_LIMIT_BYTES}. */
const parseBodyLimit: EnvParse<number> = (raw) => {
  const size = parseSize(/^\d+$/.test(raw) ? Number(raw) : raw);
  if (!size.ok) return { ok: false, reason: size.message };
  if (size.bytes > MAX_BODY_LIMIT_BYTES) return { ok: false, reason: `must be at most ${MAX_BODY_LIMIT_BYTES} bytes (${MAX_BODY_LIMIT_BYTES / 1024 / 1024}MiB)` };
  return { ok: true, value: size.bytes };
};

/**
 * Every setting llmgw-catalog reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start.
 */
export const catalogConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (catalog API, health, readiness, metrics); 0 = any free port. */
    LLMGW_CATALOG_PORT: env.port({ default: 8083 }),
    /** Bearer token every /v1/catalog request must carry; unset = the API refuses every request. */
    LLMGW_CATALOG_ADMIN_TOKEN: env.token({ optional: true }),
    /** Largest request body; a bigger one is answered 413 without being read. Default 1MiB. */
    LLMGW_CATALOG_BODY_LIMIT: envVar(parseBodyLimit, { default: 1024 * 1024 }),
    ...DATABASE_ENV,
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_CATALOG_PORT,
    /** Undefined: no token configured, every catalog request is refused (401). */
    adminToken: e.LLMGW_CATALOG_ADMIN_TOKEN,
    bodyLimitBytes: e.LLMGW_CATALOG_BODY_LIMIT,
    /** Store connection; unset = SQLite file `llmgw.db` in the data dir (shared with the controller). */
    databaseUrl: e.LLMGW_DATABASE_URL ?? `sqlite:${join(e.LLMGW_DATA_DIR, 'llmgw.db')}`,
  }));

/** llmgw-catalog's configuration: frozen, typed, in the names code uses. */
export type CatalogConfig = DeepReadonly<z.output<typeof catalogConfigSchema>>;

/** Injection token of {@link CatalogConfig}. */
export const CATALOG_CONFIG = Symbol('llmgw.catalog-config');
