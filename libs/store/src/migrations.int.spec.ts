import { testBackends, type TestDatabase } from '@llmgw/testing';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDataSource, migrate } from './data-source.factory';
import { StoreDatabase } from './database.client';
import { MIGRATIONS } from './migrations/all.migrations';
import { openStore } from './store.factory';

const TABLES = ['admin_tokens', 'api_keys', 'catalog_revisions', 'events', 'key_usage', 'leases', 'node_credentials', 'nodes', 'replicas'];

async function tables(db: StoreDatabase): Promise<string[]> {
  const sql =
    db.dialect === 'sqlite'
      ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
      : "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename";
  return (await db.query(sql)).rows.map((r) => String(r.name));
}

describe.each(testBackends())('migrations on $name', (backend) => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await backend.create();
  });
  afterEach(async () => {
    await db.drop();
  });

  it('apply from empty once, even when several processes open the store at the same time, and revert cleanly', async () => {
    const names = MIGRATIONS.map((M) => new M().name!);
    const stores = await Promise.all([1, 2, 3].map(() => openStore(db.url)));
    try {
      expect(stores.map((s) => s.appliedMigrations).flat()).toEqual(names);
      expect(await tables(stores[0].database)).toEqual([...TABLES, 'migrations'].sort());
      const reopened = await openStore(db.url);
      expect(reopened.appliedMigrations).toEqual([]);
      await reopened.close();
    } finally {
      for (const s of stores) await s.close();
    }
    const ds = createDataSource(db.url);
    await ds.initialize();
    try {
      for (let i = 0; i < names.length; i++) await ds.undoLastMigration();
      expect(await tables(new StoreDatabase(ds))).toEqual(['migrations']);
      expect(await migrate(ds)).toEqual(names);
    } finally {
      await ds.destroy();
    }
  });

  it('bring a database written by the first schema up to date, keeping its rows: a cordoned node is not draining', async () => {
    const [first, ...later] = MIGRATIONS;
    const old = new DataSource({ ...createDataSource(db.url).options, migrations: [first] } as DataSourceOptions);
    await old.initialize();
    try {
      await migrate(old);
      const hardware = { gpus: [], cpuCores: 4, memoryBytes: 8, cache: { dir: '/c', totalBytes: 0, freeBytes: 0, entries: [] } };
      await new StoreDatabase(old).query(
        'INSERT INTO nodes (id, address, labels, fabric, hardware, cordoned, state, last_seen) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
        ['cpu-1', '10.0.0.1', '{}', null, JSON.stringify(hardware), true, 'healthy', 1_767_225_600_000],
      );
    } finally {
      await old.destroy();
    }
    const store = await openStore(db.url);
    try {
      expect(store.appliedMigrations).toEqual(later.map((M) => new M().name));
      expect(await store.nodes.get('cpu-1')).toMatchObject({ id: 'cpu-1', cordoned: true, draining: false, lastSeen: 1_767_225_600_000 });
      await store.nodes.setCordoned('cpu-1', true, true);
      expect(await store.nodes.get('cpu-1')).toMatchObject({ cordoned: true, draining: true });
      // A node stored before credentials existed is not bound: its next join binds it.
      expect(await store.nodes.credentialHash('cpu-1')).toBeUndefined();
      expect(await store.nodes.bindCredential('cpu-1', 'hash', 1_767_225_600_001)).toBe(true);
    } finally {
      await store.close();
    }
  });
});
