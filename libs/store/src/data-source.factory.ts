import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
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
 * A TypeORM DataSource (not yet initialised) for `LLMGW_DATABASE_URL`: node-sqlite3 with a
 * busy timeout (`PRAGMA busy_timeout`, set by TypeORM on the connection it opens) for
 * `sqlite:<path>`, a pg pool for `postgres://…`. The schema is only ever changed by the
 * migrations ({@link migrate}); synchronisation is off.
 *
 * WAL mode is not TypeORM's to set ({@link enableWal} does it once the connection is open):
 * TypeORM runs `PRAGMA journal_mode = WAL` before `PRAGMA busy_timeout`, and switching a new
 * database to WAL needs its exclusive lock, so two processes opening one fresh file at the same
 * moment (two controllers on one SQLite file, a catalog API beside a controller) could fail at
 * once with SQLITE_BUSY instead of waiting their turn.
 */
export function createDataSource(url: string | DatabaseLocation, options: StoreConnectionOptions = {}): DataSource {
  const location = typeof url === 'string' ? parseDatabaseUrl(url) : url;
  const common = { synchronize: false, migrationsRun: false, logging: false, entities: [], migrations: [...MIGRATIONS] };
  if (location.kind === 'sqlite') {
    return new DataSource({
      ...common,
      type: 'sqlite',
      database: location.path,
      enableWAL: false,
      busyTimeout: options.busyTimeoutMs ?? 5_000,
      driver: quietSqlite3(),
    });
  }
  return new DataSource({
    ...common,
    type: 'postgres',
    driver: DRIVERS.postgres(),
    url: location.url,
    connectTimeoutMS: options.connectTimeoutMs ?? 5_000,
    applicationName: 'llmgw',
    extra: { max: options.poolSize ?? 10, query_timeout: options.queryTimeoutMs ?? 10_000 },
  });
}

/**
 * The driver module of each database, required only when that database is chosen: a PostgreSQL
 * deployment never loads the SQLite addon, nor a SQLite one pg. They are named here rather than
 * left to TypeORM's require by name so that the build sees them: a built app's package.json lists
 * what its bundle requires, and TypeORM's other optional peers (ioredis, mysql2…) are not among
 * them.
 */
const DRIVERS = {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  sqlite: () => require('sqlite3') as typeof import('sqlite3'),
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  postgres: () => require('pg') as typeof import('pg'),
};

/**
 * node-sqlite3 as TypeORM's driver, minus its verbose mode. TypeORM calls `driver.verbose()`,
 * which wraps every statement so that each call captures a stack and `util.inspect`s its SQL and
 * parameters, for a longer stack on errors nobody here reads (the store maps driver errors
 * itself). This `verbose()` answers the driver unchanged.
 */
function quietSqlite3(): typeof import('sqlite3') {
  const sqlite3 = DRIVERS.sqlite();
  const quiet: typeof import('sqlite3') = Object.create(sqlite3, { verbose: { value: () => quiet } });
  return quiet;
}

/**
 * Puts an open SQLite database in WAL mode (readers never wait for the writer). Nothing for
 * `:memory:`, which has no log. SQLite answers SQLITE_BUSY to the switch at once, busy timeout or
 * not, while another connection holds the file (it will not wait where waiting could deadlock),
 * so a busy answer is retried every `retryMs` for up to `waitMs`. Throws when SQLite stays busy
 * that long, or answers another mode (a filesystem without shared memory, for one).
 */
export async function enableWal(
  query: (sql: string) => Promise<{ rows: readonly Record<string, unknown>[] }>,
  location: DatabaseLocation,
  { waitMs = 5_000, retryMs = 10 }: { waitMs?: number; retryMs?: number } = {},
): Promise<void> {
  if (location.kind !== 'sqlite' || location.path === ':memory:') return;
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const { rows } = await query('PRAGMA journal_mode = WAL');
      const mode = String(rows[0]?.['journal_mode'] ?? '');
      if (mode.toLowerCase() !== 'wal') throw new Error(`SQLite did not switch ${location.path} to WAL mode (it answered '${mode}')`);
      return;
    } catch (error) {
      if (!/SQLITE_BUSY/.test(String((error as Error).message)) || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    }
  }
}

/**
 * Makes a SQLite location ready and private: creates its folder (0700) when missing, and the
 * database file with mode 0600 before SQLite opens it, so its `-wal` and `-shm` files, which
 * SQLite creates with the database's own mode, are 0600 too. An existing database, WAL or SHM
 * file readable by group or others is narrowed to 0600: the store holds catalog env values and
 * events. An existing folder is left as it is (it may be shared on purpose).
 */
export function prepareLocation(location: DatabaseLocation): void {
  if (location.kind !== 'sqlite' || location.path === ':memory:') return;
  mkdirSync(dirname(location.path), { recursive: true, mode: 0o700 });
  if (!existsSync(location.path)) closeSync(openSync(location.path, 'a', 0o600));
  for (const file of [location.path, `${location.path}-wal`, `${location.path}-shm`]) {
    if (existsSync(file) && (statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  }
}

/**
 * Applies pending migrations in one transaction and returns their names. Safe when several
 * processes start at once: PostgreSQL serialises them with a transaction-scoped advisory lock,
 * SQLite with BEGIN IMMEDIATE; whoever comes second finds nothing pending.
 */
export async function migrate(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  const sqlite = dataSource.options.type === 'sqlite';
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

/** The oldest SQLite the store runs on: the lease claim is one `INSERT … ON CONFLICT … RETURNING` (3.35). */
export const MIN_SQLITE_VERSION = '3.35.0';

/**
 * Throws, naming both versions, unless `version` (what `SELECT sqlite_version()` answers) is at
 * least {@link MIN_SQLITE_VERSION}. node-sqlite3 bundles its own SQLite, but a build against a
 * system library (`--sqlite=/usr`) may bring an older one.
 */
export function checkSqliteVersion(version: string): void {
  const parts = (v: string) => v.split('.').map((n) => Number.parseInt(n, 10));
  const have = parts(version);
  const need = parts(MIN_SQLITE_VERSION);
  if (have.length < 2 || have.some((n) => !Number.isFinite(n))) throw new Error(`store: cannot read the SQLite version '${version}'`);
  for (let i = 0; i < need.length; i++) {
    const h = have[i] ?? 0;
    if (h > need[i]) return;
    if (h < need[i]) {
      throw new Error(`store: SQLite ${version} is too old; the store needs ${MIN_SQLITE_VERSION} or newer (INSERT … ON CONFLICT … RETURNING)`);
    }
  }
}
