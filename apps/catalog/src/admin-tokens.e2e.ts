// Admin tokens with scopes, on a real catalog process on SQLite and PostgreSQL: the bootstrap
// token mints them, a read token reads and dry-runs but changes nothing, a write token changes
// but cannot mint tokens, a revoked one is refused, and no answer or log line shows a secret.
import { stopAllSpawned, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCatalogApp, TEST_TOKEN, type CatalogApp } from './test/catalog-app.harness';

afterAll(() => stopAllSpawned());

const MODEL = { name: 'llama', source: 'https://models.example/llama.gguf', size: '1GB', replicas: 1, profiles: [{ engine: 'llamacpp' }] };

describe.each(testBackends())('admin tokens on $name', (backend) => {
  let db: TestDatabase;
  let app: CatalogApp;
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
  };

  beforeAll(async () => {
    db = await backend.create();
    app = await startCatalogApp({ databaseUrl: db.url });
  });
  afterAll(async () => {
    await app?.stop();
    await db?.drop();
  });

  it('gives each token exactly its scopes, refuses a revoked one, and shows no secret after creation', async () => {
    const read = await call('POST', '/v1/admin-tokens', TEST_TOKEN, { name: 'dashboards', scopes: ['read'] });
    const write = await call('POST', '/v1/admin-tokens', TEST_TOKEN, { name: 'deployer', scopes: ['write'] });
    expect(read).toMatchObject({ status: 201, body: { token: { name: 'dashboards', scopes: ['read'] } } });
    expect(write).toMatchObject({ status: 201, body: { token: { name: 'deployer', scopes: ['read', 'write'] } } });
    const r: string = read.body.secret;
    const w: string = write.body.secret;
    expect(r).toMatch(/^llmgw-admin-[A-Za-z0-9_-]{43}$/);

    expect((await call('PUT', '/v1/catalog', w, { models: [MODEL] })).status).toBe(200);
    expect((await call('GET', '/v1/catalog', r)).status).toBe(200);
    expect((await call('POST', '/v1/catalog/validate', r, { models: [MODEL] })).status).toBe(200);
    expect((await call('GET', '/v1/keys', r)).status).toBe(200);
    for (const [method, path, body] of [
      ['PUT', '/v1/catalog', { models: [] }],
      ['DELETE', '/v1/catalog/models/llama', undefined],
      ['POST', '/v1/keys', { name: 'k', owner: 'o', models: ['llama'] }],
      ['POST', '/v1/admin-tokens', { name: 'escalate', scopes: ['write'] }],
      ['GET', '/v1/admin-tokens', undefined],
    ] as const) {
      const refused = await call(method, path, r, body);
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(refused.body).toMatchObject({ code: 'permission_denied' });
    }
    expect((await call('POST', '/v1/admin-tokens', w, { name: 'escalate', scopes: ['write'] })).status).toBe(403);
    expect((await call('GET', '/v1/catalog', TEST_TOKEN)).body.models.map((m: { name: string }) => m.name)).toEqual(['llama']);

    const list = await call('GET', '/v1/admin-tokens', TEST_TOKEN);
    expect(list.body.tokens.map((t: { name: string }) => t.name)).toEqual(['dashboards', 'deployer']);
    expect(list.text).not.toContain(r);
    expect(list.text).not.toMatch(/secret|hash/i);

    expect((await call('POST', '/v1/admin-tokens/dashboards/revoke', TEST_TOKEN)).body).toMatchObject({ revokedAt: expect.any(String) });
    expect((await call('GET', '/v1/catalog', r)).status).toBe(401);
    expect((await call('POST', '/v1/admin-tokens/nobody/revoke', TEST_TOKEN)).status).toBe(404);
    for (const bad of [{ name: 'x', scopes: [] }, { name: 'x', scopes: ['admin'] }, { name: 'x' }, { name: '', scopes: ['read'] }, { name: 'x', scopes: ['read'], secret: 'mine' }]) {
      expect((await call('POST', '/v1/admin-tokens', TEST_TOKEN, bad)).status, JSON.stringify(bad)).toBe(422);
    }
    expect((await call('POST', '/v1/admin-tokens', TEST_TOKEN, { name: 'deployer', scopes: ['read'] })).status).toBe(409);
    expect(app.proc.stdout + app.proc.stderr).not.toContain(r);
    expect(app.proc.stdout + app.proc.stderr).not.toContain(w);
    expect(app.proc.stdout + app.proc.stderr).not.toContain(TEST_TOKEN);
  });
});
