import { DomainError, ErrorCode } from '@llmgw/domain';
import type { Database as SqliteConnection } from 'sqlite3';
import type { DataSource, QueryRunner } from 'typeorm';

/** The two databases the store runs on. */
export type Dialect = 'sqlite' | 'postgres';

/** Rows a statement returned (RETURNING or SELECT) and how many rows it changed. */
export interface QueryResult {
  readonly rows: Record<string, unknown>[];
  readonly affected: number;
}

/** Runs one SQL text written with PostgreSQL placeholders ($1, $2, …) on either database. */
export interface SqlExecutor {
  readonly dialect: Dialect;
  query(text: string, params?: readonly unknown[]): Promise<QueryResult>;
}

/**
 * Turns one query text into the driver's form. The text uses `$n` placeholders (PostgreSQL's
 * own); for SQLite each `$n` becomes `?` with the parameter list expanded in order of
 * appearance (so `$1` may repeat), and booleans become 1/0. The SQL is otherwise unchanged.
 */
export function toDialect(dialect: Dialect, text: string, params: readonly unknown[]): [string, unknown[]] {
  if (dialect === 'postgres') return [text, [...params]];
  const out: unknown[] = [];
  const sql = text.replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n) - 1;
    if (index < 0 || index >= params.length) throw new Error(`SQL placeholder $${n} has no parameter (${params.length} given)`);
    const value = params[index];
    out.push(typeof value === 'boolean' ? (value ? 1 : 0) : value);
    return '?';
  });
  return [sql, out];
}

/**
 * The store's one way to run SQL over a TypeORM DataSource. On SQLite all work is serialised
 * through one in-process queue, because TypeORM shares a single connection there and two
 * interleaved transactions would silently nest: node-sqlite3 runs statements off the event
 * loop, so while one transaction waits for its next statement another caller's work would
 * otherwise land inside it. Transactions take the write lock up front (BEGIN IMMEDIATE) so
 * they never fail half-way on a lock another process holds. On PostgreSQL each call takes a
 * pooled connection.
 */
export class StoreDatabase implements SqlExecutor {
  readonly dialect: Dialect;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(readonly dataSource: DataSource) {
    const type = dataSource.options.type;
    if (type === 'sqlite') this.dialect = 'sqlite';
    else if (type === 'postgres') this.dialect = 'postgres';
    else throw new DomainError(ErrorCode.InvalidArgument, `store: unsupported database type '${type}'`);
  }

  /** One statement in its own transaction (autocommit). */
  query(text: string, params: readonly unknown[] = []): Promise<QueryResult> {
    if (this.dialect === 'sqlite') return this.serialised(() => runSqlite(this.sqlite(), text, params));
    return this.withRunner((runner) => run(runner, text, params));
  }

  /** Runs `work` in one transaction: committed if it resolves, rolled back if it throws. */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const dialect = this.dialect;
    if (dialect === 'sqlite') {
      return this.serialised(async () => {
        const connection = this.sqlite();
        const tx: SqlExecutor = { dialect, query: (text, params = []) => runSqlite(connection, text, params) };
        await tx.query('BEGIN IMMEDIATE');
        try {
          const result = await work(tx);
          await tx.query('COMMIT');
          return result;
        } catch (error) {
          await tx.query('ROLLBACK').catch(() => undefined);
          throw error;
        }
      });
    }
    return this.withRunner(async (runner) => {
      const tx: SqlExecutor = { dialect, query: (text, params = []) => run(runner, text, params) };
      await guard(() => runner.startTransaction());
      try {
        const result = await work(tx);
        await guard(() => runner.commitTransaction());
        return result;
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
        throw error;
      }
    });
  }

  /** Runs `work` with exclusive use of the SQLite connection (a no-op wrapper on PostgreSQL). */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return this.dialect === 'sqlite' ? this.serialised(work) : work();
  }

  /** The DataSource's one node-sqlite3 connection; `unavailable` once the store is closed. */
  private sqlite(): SqliteConnection {
    const connection = (this.dataSource.driver as unknown as { databaseConnection?: SqliteConnection }).databaseConnection;
    if (!this.dataSource.isInitialized || !connection) throw new DomainError(ErrorCode.Unavailable, 'store unavailable: the SQLite connection is closed');
    return connection;
  }

  private serialised<T>(work: () => Promise<T>): Promise<T> {
    const result = this.queue.then(work, work);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async withRunner<T>(work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    try {
      return await work(runner);
    } finally {
      await runner.release().catch(() => undefined);
    }
  }
}

/** One statement on a pooled PostgreSQL connection, through TypeORM. */
async function run(runner: QueryRunner, text: string, params: readonly unknown[]): Promise<QueryResult> {
  const [sql, values] = toDialect('postgres', text, params);
  const result = await guard(() => runner.query(sql, values, true));
  const rows = Array.isArray(result.records) ? (result.records as Record<string, unknown>[]) : [];
  return { rows, affected: typeof result.affected === 'number' ? result.affected : rows.length };
}

/**
 * Whether a SQLite statement answers rows: everything but INSERT, UPDATE, DELETE and REPLACE,
 * and those too when they have RETURNING. node-sqlite3 gives rows (`all`) or the changed-row
 * count (`run`), never both, so the store asks for whichever the statement has.
 */
export function answersRows(sql: string): boolean {
  return !/^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i.test(sql) || /\bRETURNING\b/i.test(sql);
}

/**
 * One statement straight on the node-sqlite3 connection. Not through TypeORM's query runner:
 * it picks `run` for any text starting with INSERT, UPDATE or DELETE and so drops the rows of
 * `INSERT … RETURNING` (the lease claim). A statement with RETURNING counts its rows as changed.
 */
function runSqlite(connection: SqliteConnection, text: string, params: readonly unknown[]): Promise<QueryResult> {
  const [sql, values] = toDialect('sqlite', text, params);
  return guard(
    () =>
      new Promise<QueryResult>((resolve, reject) => {
        if (answersRows(sql)) {
          connection.all(sql, values, (error: Error | null, rows: Record<string, unknown>[]) =>
            error ? reject(error) : resolve({ rows, affected: rows.length }),
          );
        } else {
          connection.run(sql, values, function (error: Error | null) {
            if (error) reject(error);
            else resolve({ rows: [], affected: this.changes });
          });
        }
      }),
  );
}

async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw isUnavailable(error) ? new DomainError(ErrorCode.Unavailable, `store unavailable: ${messageOf(error)}`) : error;
  }
}

/** The driver error behind a TypeORM QueryFailedError (or the error itself: node-sqlite3's are not wrapped). */
function driverError(error: unknown): { code?: unknown; message?: unknown } {
  const e = error as { driverError?: unknown };
  return (e && typeof e === 'object' && e.driverError && typeof e.driverError === 'object' ? e.driverError : error) as { code?: unknown };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A unique or primary-key violation on either database. */
export function isUniqueViolation(error: unknown): boolean {
  const d = driverError(error);
  // node-sqlite3 reports only the primary result code; the message says which constraint failed.
  return d?.code === '23505' || (d?.code === 'SQLITE_CONSTRAINT' && /UNIQUE constraint failed/.test(messageOf(d)));
}

/** Errors that say the database cannot be reached or is busy, rather than that the SQL is wrong. */
function isUnavailable(error: unknown): boolean {
  if (error instanceof DomainError) return false;
  const d = driverError(error);
  const code = typeof d?.code === 'string' ? d.code : '';
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)$/.test(code)) return true;
  if (/^(08|57P0|53)/.test(code)) return true; // PostgreSQL: connection exception, shutdown, insufficient resources
  if (/^SQLITE_(BUSY|LOCKED|CANTOPEN|IOERR)/.test(code)) return true;
  const message = messageOf(d ?? error);
  return /Connection terminated|connection timeout|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection is not established|not connected|connection is not open|Database is closed|after calling end on the pool|Driver not Connected/i.test(
    message,
  );
}
