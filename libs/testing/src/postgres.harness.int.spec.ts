import { existsSync } from 'node:fs';
import { Client } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { findPostgresBinDir, startPostgres, type PostgresServer } from './postgres.harness';

async function query(url: string, sql: string): Promise<unknown[]> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

describe('PostgresServer', () => {
  let server: PostgresServer | undefined;
  afterAll(async () => {
    await server?.close();
  });

  it('finds the newest installed PostgreSQL', () => {
    expect(findPostgresBinDir()).toMatch(/\/usr\/lib\/postgresql\/\d+\/bin$/);
    expect(findPostgresBinDir('/nonexistent')).toBeUndefined();
  });

  it('starts, survives stop/start and kill/start with its data, and deletes everything on close', async () => {
    server = await startPostgres();
    expect(server.port).toBeGreaterThan(0);
    await query(server.url, 'CREATE TABLE kept (v integer); INSERT INTO kept VALUES (42)');

    await server.stop();
    expect(server.isRunning()).toBe(false);
    await expect(query(server.url, 'SELECT 1')).rejects.toThrow(/ECONNREFUSED/);
    await server.start();
    expect(await query(server.url, 'SELECT v FROM kept')).toEqual([{ v: 42 }]);

    await server.kill();
    await expect(query(server.url, 'SELECT 1')).rejects.toThrow(/ECONNREFUSED/);
    await server.start();
    expect(await query(server.url, 'SELECT v FROM kept')).toEqual([{ v: 42 }]);

    const dir = server.dir;
    await server.close();
    expect(existsSync(dir)).toBe(false);
    await expect(query(server.url, 'SELECT 1')).rejects.toThrow(/ECONNREFUSED/);
    server = undefined;
  });
});
