import { systemClock, type Clock } from '@llmgw/domain';
import type { DataSource } from 'typeorm';
import { TypeormAdminTokenRepository } from './admin-token.repository';
import { TypeormApiKeyRepository } from './api-key.repository';
import { TypeormKeyUsageRepository } from './key-usage.repository';
import { TypeormCatalogRepository } from './catalog.repository';
import { checkSqliteVersion, createDataSource, enableWal, migrate, prepareLocation, type StoreConnectionOptions } from './data-source.factory';
import { StoreDatabase, type Dialect } from './database.client';
import { parseDatabaseUrl, redactDatabaseUrl } from './database-url.parser';
import { TypeormEventRepository } from './event.repository';
import { TypeormLeaseRepository } from './lease.repository';
import { TypeormNodeRepository } from './node.repository';
import { TypeormReplicaRepository } from './replica.repository';

/** Options for {@link openStore}. */
export interface StoreOptions extends StoreConnectionOptions {
  /** Clock for fence checks and default timestamps (default: the system clock). */
  clock?: Clock;
  /** Events kept (newest first); default 10000. */
  eventRetention?: number;
  /** Apply pending migrations before returning (default true: the apps that own the store). */
  migrate?: boolean;
}

/** An open store: every repository over one connection (SQLite) or pool (PostgreSQL). */
export interface Store {
  readonly dialect: Dialect;
  readonly dataSource: DataSource;
  readonly database: StoreDatabase;
  readonly nodes: TypeormNodeRepository;
  readonly replicas: TypeormReplicaRepository;
  readonly catalog: TypeormCatalogRepository;
  readonly events: TypeormEventRepository;
  readonly leases: TypeormLeaseRepository;
  readonly apiKeys: TypeormApiKeyRepository;
  readonly adminTokens: TypeormAdminTokenRepository;
  readonly keyUsage: TypeormKeyUsageRepository;
  /** Names of the migrations this open applied (empty when the schema was current). */
  readonly appliedMigrations: readonly string[];
  /** Closes the connection or pool. */
  close(): Promise<void>;
}

/**
 * Opens the store at `url` (`sqlite:<path>` or `postgres://…`; see parseDatabaseUrl), applies
 * pending migrations unless told not to, and returns the repositories. A failure names the
 * redacted URL; nothing is left open.
 */
export async function openStore(url: string, options: StoreOptions = {}): Promise<Store> {
  const location = parseDatabaseUrl(url);
  prepareLocation(location);
  const dataSource = createDataSource(location, options);
  try {
    await dataSource.initialize();
  } catch (error) {
    throw new Error(`store: cannot open ${redactDatabaseUrl(url)}: ${(error as Error).message}`);
  }
  try {
    const database = new StoreDatabase(dataSource);
    if (database.dialect === 'sqlite') {
      const { rows } = await database.query('SELECT sqlite_version() AS version');
      checkSqliteVersion(String(rows[0]?.version));
      await enableWal((sql) => database.query(sql), location, { waitMs: options.busyTimeoutMs ?? 5_000 });
      // In WAL mode NORMAL syncs the log at checkpoints, not on every commit: an application
      // crash loses nothing, a power cut may lose the newest commits but never corrupts the
      // file. better-sqlite3's build made it the WAL default (SQLITE_DEFAULT_WAL_SYNCHRONOUS=1);
      // node-sqlite3's keeps FULL, an fsync per commit.
      await database.query('PRAGMA synchronous = NORMAL');
    }
    const appliedMigrations = options.migrate === false ? [] : await migrate(dataSource);
    const clock = options.clock ?? systemClock;
    return {
      dialect: database.dialect,
      dataSource,
      database,
      nodes: new TypeormNodeRepository(database),
      replicas: new TypeormReplicaRepository(database, clock),
      catalog: new TypeormCatalogRepository(database, clock),
      events: new TypeormEventRepository(database, clock, options.eventRetention),
      leases: new TypeormLeaseRepository(database, clock),
      apiKeys: new TypeormApiKeyRepository(database, clock),
      adminTokens: new TypeormAdminTokenRepository(database, clock),
      keyUsage: new TypeormKeyUsageRepository(database),
      appliedMigrations,
      close: async () => {
        // Let queued SQLite work finish before the connection goes away.
        await database.exclusive(async () => undefined);
        if (dataSource.isInitialized) await dataSource.destroy();
      },
    };
  } catch (error) {
    await dataSource.destroy().catch(() => undefined);
    throw error;
  }
}
