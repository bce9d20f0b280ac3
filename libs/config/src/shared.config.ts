import { env } from './env-var.schema';

/** Log levels accepted by LLMGW_LOG_LEVEL, most severe first (pino's names). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Schemes LLMGW_DATABASE_URL accepts: PostgreSQL, or SQLite by file path. */
export const DATABASE_URL_PROTOCOLS = ['postgres:', 'postgresql:', 'sqlite:'] as const;

/**
 * Variables every llmgw server reads. Spread into an app's `z.object({...})` and map with
 * {@link sharedConfig}.
 */
export const SHARED_ENV = {
  /** pino level; default info. */
  LLMGW_LOG_LEVEL: env.oneOf(LOG_LEVELS, { default: 'info' }),
  /** Where an app keeps its state (SQLite file, caches); default ./.llmgw, made absolute. */
  LLMGW_DATA_DIR: env.path({ default: './.llmgw' }),
  /** Address to bind; default 127.0.0.1 (loopback only). */
  LLMGW_HOST: env.host({ default: '127.0.0.1' }),
  /** Longest a graceful shutdown may take before the process exits anyway; default 10s. */
  LLMGW_SHUTDOWN_TIMEOUT: env.duration({ default: '10s' }),
} as const;

/** The store connection, for apps that have one; unset = SQLite in the data dir. */
export const DATABASE_ENV = {
  LLMGW_DATABASE_URL: env.url(DATABASE_URL_PROTOCOLS, { optional: true }),
} as const;

/** What every server knows about itself, in the names code uses. */
export interface SharedConfig {
  logLevel: LogLevel;
  /** Absolute path. */
  dataDir: string;
  host: string;
  shutdownTimeoutMs: number;
}

/** Maps the parsed shared variables to {@link SharedConfig}. */
export function sharedConfig(e: {
  LLMGW_LOG_LEVEL: LogLevel;
  LLMGW_DATA_DIR: string;
  LLMGW_HOST: string;
  LLMGW_SHUTDOWN_TIMEOUT: number;
}): SharedConfig {
  return { logLevel: e.LLMGW_LOG_LEVEL, dataDir: e.LLMGW_DATA_DIR, host: e.LLMGW_HOST, shutdownTimeoutMs: e.LLMGW_SHUTDOWN_TIMEOUT };
}
