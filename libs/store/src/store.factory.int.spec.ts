import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode } from '@llmgw/domain';
import { freePort } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { checkSqliteVersion } from './data-source.factory';
import { openStore } from './store.factory';

describe('openStore', () => {
  it('creates a SQLite file and its folder, in WAL mode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    try {
      const file = join(dir, 'nested', 'state', 'llmgw.db');
      const store = await openStore(`sqlite:${file}`);
      expect(store.dialect).toBe('sqlite');
      expect(existsSync(file)).toBe(true);
      expect((await store.database.query('PRAGMA journal_mode')).rows).toEqual([{ journal_mode: 'wal' }]);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('opens one new SQLite file from several connections at once, each in WAL mode (no SQLITE_BUSY)', async () => {
    // Two controllers (or a catalog API beside a controller) starting together on one file: the
    // switch to WAL needs the file alone and SQLite answers BUSY at once, busy timeout or not.
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    try {
      for (let round = 0; round < 20; round++) {
        const url = `sqlite:${join(dir, `race-${round}.db`)}`;
        const stores = await Promise.all([openStore(url), openStore(url), openStore(url)]);
        for (const store of stores) {
          expect((await store.database.query('PRAGMA journal_mode')).rows).toEqual([{ journal_mode: 'wal' }]);
          await store.close();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('syncs the SQLite WAL at checkpoints, not on every commit (synchronous NORMAL)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    try {
      const store = await openStore(`sqlite:${join(dir, 'llmgw.db')}`);
      expect((await store.database.query('PRAGMA synchronous')).rows).toEqual([{ synchronous: 1 }]);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sets a busy timeout on the SQLite connection: 5 s unless told otherwise', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    try {
      const file = join(dir, 'llmgw.db');
      const defaults = await openStore(`sqlite:${file}`);
      expect((await defaults.database.query('PRAGMA busy_timeout')).rows).toEqual([{ timeout: 5_000 }]);
      await defaults.close();
      const custom = await openStore(`sqlite:${file}`, { busyTimeoutMs: 1_234 });
      expect((await custom.database.query('PRAGMA busy_timeout')).rows).toEqual([{ timeout: 1_234 }]);
      await custom.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs on a bundled SQLite new enough for the single-statement lease (3.35+)', async () => {
    const store = await openStore('sqlite::memory:');
    try {
      const version = String((await store.database.query('SELECT sqlite_version() AS v')).rows[0].v);
      const [major, minor] = version.split('.').map(Number);
      expect(major * 1000 + minor, version).toBeGreaterThanOrEqual(3035);
      expect(() => checkSqliteVersion(version)).not.toThrow();
    } finally {
      await store.close();
    }
  });

  it('keeps the SQLite files private: folder 0700, database, WAL and SHM 0600', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8);
    try {
      const file = join(dir, 'data', 'llmgw.db');
      const store = await openStore(`sqlite:${file}`);
      await store.database.query('CREATE TABLE t (x INTEGER)');
      await store.database.query('INSERT INTO t VALUES (1)');
      expect(mode(join(dir, 'data'))).toBe('700');
      for (const f of [file, `${file}-wal`, `${file}-shm`]) expect([f, mode(f)]).toEqual([f, '600']);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('narrows a database that an older version left readable by others to 0600', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-store-'));
    try {
      const file = join(dir, 'llmgw.db');
      writeFileSync(file, '');
      chmodSync(file, 0o644);
      const store = await openStore(`sqlite:${file}`);
      expect((statSync(file).mode & 0o777).toString(8)).toBe('600');
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a bad URL before connecting', async () => {
    await expect(openStore('mysql://db/llmgw')).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
  });

  it('names the unreachable server without its password', async () => {
    const port = await freePort();
    const failure = openStore(`postgres://llmgw:hunter2@127.0.0.1:${port}/llmgw`, { connectTimeoutMs: 1_000 });
    await expect(failure).rejects.toThrow(`cannot open postgres://llmgw:***@127.0.0.1:${port}/llmgw`);
    await expect(failure).rejects.not.toThrow(/hunter2/);
  });
});

describe('checkSqliteVersion', () => {
  it('accepts 3.35 and newer', () => {
    for (const v of ['3.35.0', '3.35.5', '3.52.0', '4.0.0', '3.100']) expect(() => checkSqliteVersion(v), v).not.toThrow();
  });
  it('refuses an older SQLite, naming both versions', () => {
    for (const v of ['3.34.1', '3.8.11', '2.99.99']) {
      expect(() => checkSqliteVersion(v), v).toThrow(`store: SQLite ${v} is too old; the store needs 3.35.0 or newer`);
    }
  });
  it('refuses a version it cannot read', () => {
    expect(() => checkSqliteVersion('undefined')).toThrow("cannot read the SQLite version 'undefined'");
  });
});
