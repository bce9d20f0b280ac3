import { existsSync } from 'node:fs';
import { Client } from 'pg';
import { describe, expect, it } from 'vitest';
import { testBackends, testDatabaseUrl } from './databases';

async function databaseExists(name: string): Promise<boolean> {
  const client = new Client({ connectionString: testDatabaseUrl() });
  await client.connect();
  try {
    return (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await client.end();
  }
}

describe.each(testBackends())('testBackends: $name', (backend) => {
  it('gives a different empty database on each create and removes it on drop', async () => {
    const a = await backend.create();
    const b = await backend.create();
    expect(a.url).not.toBe(b.url);
    expect(a.backend).toBe(backend.name);
    if (backend.name === 'sqlite') {
      expect(a.url).toMatch(/^sqlite:\/.+\/store\.db$/);
      const dir = a.url.slice('sqlite:'.length).replace(/\/store\.db$/, '');
      expect(existsSync(dir)).toBe(true);
      await a.drop();
      expect(existsSync(dir)).toBe(false);
    } else {
      const name = new URL(a.url).pathname.slice(1);
      expect(name).toMatch(/^llmgw_test_[0-9a-f]{12}$/);
      const client = new Client({ connectionString: a.url });
      await client.connect(); // an open connection does not stop drop()
      expect((await client.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).rows).toEqual([{ n: 0 }]);
      client.on('error', () => undefined);
      await a.drop();
      expect(await databaseExists(name)).toBe(false);
      await client.end().catch(() => undefined);
    }
    await b.drop();
  });
});
