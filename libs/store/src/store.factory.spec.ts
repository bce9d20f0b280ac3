import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode } from '@llmgw/domain';
import { freePort } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
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
