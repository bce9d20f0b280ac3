import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DataSource, MigrationExecutor } from 'typeorm';
import { parseDatabaseUrl, type DatabaseLocation } from './database-url.parser';
import { MIGRATIONS } from './migrations/all.migrations';

/** Connection settings; all durations in milliseconds. */
export interface StoreConnectionOptions {
  /** PostgreSQL: give up opening a connection after this long (default 5000). */
  connectTimeoutMs?: number;
  /** PostgreSQL: give up waiting for a query's answer after this long (default 10000). */
  queryTimeoutMs?: number;
  /** PostgreSQL: connections in the pool (default 10). */
  poolSize?: number;
  /** SQLite: how long a statement waits for another process's write lock (default 5000). */
  busyTimeoutMs?: number;
}

/**
 * A TypeORM DataSource (not yet initialised) for `LLMGW_DATABASE_URL`: better-sqlite3 in WAL
 * mode with a busy timeout for `sqlite:<path>`, a pg pool for `postgres://…`. The schema is
 * only ever changed by the migrations ({@link migrate}); synchronisation is off.
 */
export function createDataSource(url: string | DatabaseLocation, options: StoreConnectionOptions = {}): DataSource {
  const location = typeof url === 'string' ? parseDatabaseUrl(url) : url;
  const common = { synchronize: false, migrationsRun: false, logging: false, entities: [], migrations: [...MIGRATIONS] };
  if (location.kind === 'sqlite') {
    return new DataSource({
      ...common,
      type: 'better-sqlite3',
      database: location.path,
      enableWAL: location.path !== ':memory:',
      timeout: options.busyTimeoutMs ?? 5_000,
    });
  }
  return new DataSource({
    ...common,
    type: 'postgres',
    url: location.url,
    connectTimeoutMS: options.connectTimeoutMs ?? 5_000,
    applicationName: 'llmgw',
    extra: { max: options.poolSize ?? 10, query_timeout: options.queryTimeoutMs ?? 10_000 },
  });
}

/** Creates the folder of a SQLite file if missing, so `sqlite:<path>` needs nothing prepared. */
export function prepareLocation(location: DatabaseLocation): void {
  if (location.kind === 'sqlite' && location.path !== ':memory:') mkdirSync(dirname(location.path), { recursive: true });
}

/**
 * Applies pending migrations in one transaction and returns their names. Safe when several
 * processes start at once: PostgreSQL serialises them with a transaction-scoped advisory lock,
 * SQLite with BEGIN IMMEDIATE; whoever comes second finds nothing pending.
 */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  const sqlite = dataSource.options.type === 'better-sqlite3';
  try {
    const executor = new MigrationExecutor(dataSource, runner);
    if (sqlite) {
      executor.transaction = 'none';
      await runner.query('BEGIN IMMEDIATE');
    } else {
      executor.transaction = 'all';
      await runner.startTransaction();
      await runner.query('SELECT pg_advisory_xact_lock(7251044217431163001)'); // arbitrary key: "llmgw migrations"
    }
    try {
      const applied = await executor.executePendingMigrations();
      if (sqlite) await runner.query('COMMIT');
      else await runner.commitTransaction();
      return applied.map((m) => m.name);
    } catch (error) {
      if (sqlite) await runner.query('ROLLBACK').catch(() => undefined);
      else if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    }
  } finally {
    await runner.release();
  }
}
