import { DomainError, ErrorCode } from '@llmgw/domain';
import { sqliteBackend, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { answersRows, isUniqueViolation, toDialect, type StoreDatabase } from './database.client';
import { openStore, type Store } from './store.factory';

describe('toDialect', () => {
  it('keeps PostgreSQL text and parameters as they are', () => {
    expect(toDialect('postgres', 'SELECT $1, $2, $1', [1, true])).toEqual(['SELECT $1, $2, $1', [1, true]]);
  });
  it('turns $n into ? for SQLite, repeating parameters in order of appearance and booleans into 1/0', () => {
    expect(toDialect('sqlite', 'UPDATE t SET a = $2 WHERE b = $1 AND (c IS NULL OR c < $2) AND d = $3', ['x', 5, false])).toEqual([
      'UPDATE t SET a = ? WHERE b = ? AND (c IS NULL OR c < ?) AND d = ?',
      [5, 'x', 5, 0],
    ]);
  });
  it('refuses a placeholder without a parameter', () => {
    expect(() => toDialect('sqlite', 'SELECT $2', [1])).toThrow(/\$2 has no parameter/);
  });
});

describe('answersRows', () => {
  it('is true for reads and for writes with RETURNING, false for plain writes', () => {
    expect(answersRows('SELECT 1')).toBe(true);
    expect(answersRows('PRAGMA journal_mode')).toBe(true);
    expect(answersRows('\n  INSERT INTO t VALUES (1) ON CONFLICT (x) DO UPDATE SET y = 1\nRETURNING x')).toBe(true);
    expect(answersRows('update t set a = 1 returning a')).toBe(true);
    expect(answersRows('  UPDATE t SET a = 1')).toBe(false);
    expect(answersRows('DELETE FROM t')).toBe(false);
    expect(answersRows('insert into t values (1)')).toBe(false);
  });
});

describe('StoreDatabase on SQLite (node-sqlite3)', () => {
  let file: TestDatabase;
  let store: Store;
  let db: StoreDatabase;
  beforeEach(async () => {
    file = await sqliteBackend.create();
    store = await openStore(file.url, { migrate: false });
    db = store.database;
    await db.query('CREATE TABLE counter (n integer NOT NULL)');
    await db.query('INSERT INTO counter (n) VALUES (0)');
  });
  afterEach(async () => {
    await store.close();
    await file.drop();
  });

  it('runs concurrent transactions and queries one at a time on its one connection', async () => {
    const log: string[] = [];
    const pause = () => new Promise((resolve) => setTimeout(resolve, 5));
    const bump = (i: number) =>
      db.transaction(async (tx) => {
        log.push(`begin ${i}`);
        const { rows } = await tx.query('SELECT n FROM counter');
        await pause(); // the driver is async: without the queue the next caller's BEGIN lands here
        await tx.query('UPDATE counter SET n = $1', [Number(rows[0].n) + 1]);
        log.push(`end ${i}`);
      });
    const abandoned = db.transaction(async (tx) => {
      await tx.query('UPDATE counter SET n = 1000');
      await pause();
      throw new Error('abandoned');
    });
    const work = [bump(0), bump(1), abandoned.catch((e: Error) => e.message), db.query('SELECT n FROM counter'), bump(2)];
    const [, , abandonedResult, readBetween] = await Promise.all(work);
    expect(abandonedResult).toBe('abandoned');
    // The read queued after the abandoned transaction sees its rollback, never its uncommitted 1000.
    expect((readBetween as { rows: unknown[] }).rows).toEqual([{ n: 2 }]);
    expect(log).toEqual(['begin 0', 'end 0', 'begin 1', 'end 1', 'begin 2', 'end 2']);
    expect((await db.query('SELECT n FROM counter')).rows).toEqual([{ n: 3 }]);
  });

  it('answers the rows of INSERT … RETURNING, and the changed-row count of a plain UPDATE', async () => {
    const inserted = await db.query('INSERT INTO counter (n) VALUES ($1), ($2) RETURNING n', [7, 8]);
    expect(inserted).toEqual({ rows: [{ n: 7 }, { n: 8 }], affected: 2 });
    expect(await db.query('UPDATE counter SET n = n + 1 WHERE n > $1', [0])).toEqual({ rows: [], affected: 2 });
    expect(await db.query('DELETE FROM counter WHERE n = $1', [-1])).toEqual({ rows: [], affected: 0 });
  });

  it('tells a unique violation from other constraint failures', async () => {
    await db.query('CREATE TABLE keyed (id text PRIMARY KEY, v integer CHECK (v > 0))');
    await db.query('INSERT INTO keyed (id, v) VALUES ($1, $2)', ['a', 1]);
    const duplicate = await db.query('INSERT INTO keyed (id, v) VALUES ($1, $2)', ['a', 2]).catch((e: unknown) => e);
    const unchecked = await db.query('INSERT INTO keyed (id, v) VALUES ($1, $2)', ['b', -1]).catch((e: unknown) => e);
    expect(isUniqueViolation(duplicate)).toBe(true);
    expect(unchecked).toBeInstanceOf(Error);
    expect(isUniqueViolation(unchecked)).toBe(false);
  });

  it('answers unavailable once the store is closed', async () => {
    await store.close();
    const failure = await db.query('SELECT n FROM counter').catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(DomainError);
    expect(failure).toMatchObject({ code: ErrorCode.Unavailable });
  });
});
