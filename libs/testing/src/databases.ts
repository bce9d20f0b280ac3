import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

/** The PostgreSQL server store tests use unless LLMGW_TEST_DATABASE_URL names another. */
export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export type TestBackendName = 'sqlite' | 'postgres';

/** One fresh, empty database for one test case; `drop()` deletes it. */
export interface TestDatabase {
  readonly backend: TestBackendName;
  /** A `LLMGW_DATABASE_URL` value: `sqlite:<file>` or `postgres://…/<fresh database>`. */
  readonly url: string;
  drop(): Promise<void>;
}

/** A database kind store tests run against; `create()` gives a fresh empty database each call. */
export interface TestBackend {
  readonly name: TestBackendName;
  create(): Promise<TestDatabase>;
}

/**
 * The backends every store and lease case runs on, for `describe.each(testBackends())`:
 * SQLite on a new temp file, and PostgreSQL as a new database `llmgw_test_<random>` on the
 * server named by LLMGW_TEST_DATABASE_URL (default {@link DEFAULT_TEST_DATABASE_URL}).
 * Each case gets its own database so nothing (a lease row, say) leaks between cases.
 */
export function testBackends(): readonly TestBackend[] {
  return [sqliteBackend, postgresBackend];
}

/** Admin URL of the test PostgreSQL server (LLMGW_TEST_DATABASE_URL or the local default). */
export function testDatabaseUrl(): string {
  return process.env.LLMGW_TEST_DATABASE_URL || DEFAULT_TEST_DATABASE_URL;
}

export const sqliteBackend: TestBackend = {
  name: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-sqlite-'));
    return {
      backend: 'sqlite',
      url: `sqlite:${join(dir, 'store.db')}`,
      async drop() {
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

export const postgresBackend: TestBackend = {
  name: 'postgres',
  async create() {
    return createPostgresDatabase(testDatabaseUrl());
  },
};

/**
 * Creates `llmgw_test_<random>` on the server of `adminUrl` (which must allow CREATE DATABASE)
 * and returns its URL; `drop()` removes it, cutting any connection still open.
 */
export async function createPostgresDatabase(adminUrl: string): Promise<TestDatabase> {
  const name = `llmgw_test_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    backend: 'postgres',
    url: url.toString(),
    async drop() {
      await admin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function admin(adminUrl: string, sql: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (error) {
    const where = redact(adminUrl);
    throw new Error(
      `test PostgreSQL at ${where} is not reachable (${(error as Error).message}); start it or point LLMGW_TEST_DATABASE_URL at a server that allows CREATE DATABASE`,
    );
  }
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
