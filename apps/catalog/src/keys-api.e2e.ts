// The API keys resource as a real catalog process on SQLite and PostgreSQL: a secret shown once
// and stored only as a hash, lists that never show it, changes with If-Match, revocation for
// good, and hostile bodies that each get a 4xx and leave the store as it was.
import { createHash } from 'node:crypto';
import { openStore } from '@llmgw/store';
import { stopAllSpawned, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCatalogApp, TEST_TOKEN, type CatalogApp } from './test/catalog-app.harness';

const AUTH = { authorization: `Bearer ${TEST_TOKEN}` };

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON under test
}

afterAll(() => stopAllSpawned());

describe.each(testBackends())('API keys on $name', (backend) => {
  let db: TestDatabase;
  let app: CatalogApp;

  async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = AUTH): Promise<Answer> {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
  }

  beforeAll(async () => {
    db = await backend.create();
    app = await startCatalogApp({ databaseUrl: db.url });
    const catalog = await call('PUT', '/v1/catalog', {
      models: [
        { name: 'llama', aliases: ['llama-latest'], source: 'https://models.example/llama.gguf', size: '1GB', replicas: 1, profiles: [{ engine: 'llamacpp' }] },
        { name: 'qwen', source: 'https://models.example/qwen.gguf', size: '1GB', replicas: 1, profiles: [{ engine: 'llamacpp' }] },
      ],
    });
    expect(catalog.status).toBe(200);
  });
  afterAll(async () => {
    await app?.stop();
    await db?.drop();
  });

  it('creates a key with a secret shown once, stores only its hash, and never shows either again', async () => {
    const created = await call('POST', '/v1/keys', { name: 'search', owner: 'team-search', models: ['llama-latest', 'qwen'], limits: { requestsPerMinute: 120, concurrentRequests: 4 } });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe('/v1/keys/search');
    expect(created.headers.get('cache-control')).toBe('no-store');
    const secret: string = created.body.secret;
    expect(secret).toMatch(/^llmgw-[A-Za-z0-9_-]{43}$/); // 256 random bits
    expect(created.body.key).toMatchObject({ name: 'search', owner: 'team-search', models: ['llama-latest', 'qwen'], limits: { requestsPerMinute: 120, concurrentRequests: 4 }, state: 'active', revision: 1 });
    const hash = createHash('sha256').update(secret).digest('hex');
    for (const answer of [await call('GET', '/v1/keys'), await call('GET', '/v1/keys/search')]) {
      expect(answer.status).toBe(200);
      expect(answer.text).not.toContain(secret);
      expect(answer.text).not.toContain(hash);
      expect(answer.text).not.toMatch(/secret|hash/i);
    }
    const store = await openStore(db.url, { migrate: false });
    try {
      const row = await store.apiKeys.get('search');
      expect(row?.secretHash).toBe(hash);
      expect(JSON.stringify(row)).not.toContain(secret);
    } finally {
      await store.close();
    }
    const other = await call('POST', '/v1/keys', { name: 'batch', owner: 'ops', models: ['*'] });
    expect(other.body.secret).not.toBe(secret);
  });

  it('refuses hostile bodies with a 4xx naming each problem, and stores nothing', async () => {
    const before = (await call('GET', '/v1/keys')).text;
    const cases: [unknown, number, string][] = [
      [{ name: 'x', owner: 'o', models: ['llama'], limits: { requestsPerMinute: '120' } }, 422, 'limits.requestsPerMinute'],
      [{ name: 'x', owner: 'o', models: ['llama'], limits: { requestsPerMinute: 1e12 } }, 422, 'limits.requestsPerMinute'],
      [{ name: 'x', owner: 'o', models: ['llama'], limits: { tokensPerMinute: -5 } }, 422, 'limits.tokensPerMinute'],
      [{ name: 'x', owner: 'o', models: ['llama'], limits: { concurrentRequests: 1.5 } }, 422, 'limits.concurrentRequests'],
      [{ name: 'x', owner: 'o', models: ['llama'], limits: { burst: 5 } }, 422, 'limits.burst'],
      [{ name: 'x', owner: 'o', models: ['gpt-4o'] }, 422, 'models[0]'],
      [{ name: 'x', owner: 'o', models: [] }, 422, 'models'],
      [{ name: 'x', owner: 'o', models: 'llama' }, 422, 'models'],
      [{ name: 'x', owner: 'o', models: ['llama', 'llama'] }, 422, 'models[1]'],
      [{ name: '../etc', owner: 'o', models: ['llama'] }, 422, 'name'],
      [{ name: 'x', models: ['llama'] }, 422, 'owner'],
      [{ name: 'x', owner: 'o', models: ['llama'], expiresAt: '2001-01-01T00:00:00Z' }, 422, 'expiresAt'],
      [{ name: 'x', owner: 'o', models: ['llama'], expiresAt: 'tomorrow' }, 422, 'expiresAt'],
      [{ name: 'x', owner: 'o', models: ['llama'], secret: 'my-own-secret-please' }, 422, 'secret'],
      [[], 422, ''],
      [{ name: 'search', owner: 'o', models: ['llama'] }, 409, ''],
      [{ name: 'revoked-later', owner: 'o', models: ['llama'] }, 201, ''],
    ];
    for (const [body, status, path] of cases) {
      const r = await call('POST', '/v1/keys', body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      if (status === 201) continue;
      expect(r.headers.get('content-type')).toBe('application/problem+json');
      if (path) expect(r.body.problems.map((p: { path: string }) => p.path), JSON.stringify(body)).toContain(path);
    }
    expect((await call('POST', '/v1/keys', '{"name": "x",')).status).toBe(400);
    const after = (await call('GET', '/v1/keys')).body.keys.map((k: { name: string }) => k.name);
    expect(after).toEqual([...JSON.parse(before).keys.map((k: { name: string }) => k.name), 'revoked-later'].sort());
  });

  it('changes a key at its revision, refuses a stale If-Match, a rename and an empty change', async () => {
    const changed = await call('PATCH', '/v1/keys/search', { limits: { tokensPerMinute: 10_000 }, expiresAt: '2100-01-01T00:00:00Z' }, { ...AUTH, 'if-match': '"1"' });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).toBe('"2"');
    expect(changed.body).toMatchObject({ revision: 2, limits: { tokensPerMinute: 10_000 }, expiresAt: '2100-01-01T00:00:00.000Z', owner: 'team-search', models: ['llama-latest', 'qwen'] });
    expect(await call('PATCH', '/v1/keys/search', { owner: 'intruder' }, { ...AUTH, 'if-match': '"1"' })).toMatchObject({ status: 412, body: { currentRevision: 2 } });
    expect((await call('PATCH', '/v1/keys/search', { name: 'renamed' })).status).toBe(422);
    expect((await call('PATCH', '/v1/keys/search', {})).status).toBe(422);
    expect((await call('PATCH', '/v1/keys/search', { models: ['nope'] })).status).toBe(422);
    expect((await call('PATCH', '/v1/keys/nobody', { owner: 'x' })).status).toBe(404);
    const cleared = await call('PATCH', '/v1/keys/search', { expiresAt: null });
    expect(cleared.body.expiresAt).toBeUndefined();
    expect(cleared.body).toMatchObject({ revision: 3, owner: 'team-search' });
  });

  it('revokes a key for good: shown revoked, unchangeable, its name kept', async () => {
    const revoked = await call('POST', '/v1/keys/revoked-later/revoke');
    expect(revoked).toMatchObject({ status: 200, body: { state: 'revoked', revokedAt: expect.any(String) } });
    expect(await call('POST', '/v1/keys/revoked-later/revoke')).toMatchObject({ status: 200, body: { revision: revoked.body.revision } });
    expect((await call('PATCH', '/v1/keys/revoked-later', { owner: 'x' })).status).toBe(409);
    expect((await call('POST', '/v1/keys', { name: 'revoked-later', owner: 'o', models: ['llama'] })).status).toBe(409);
    expect((await call('POST', '/v1/keys/nobody/revoke')).status).toBe(404);
  });

  it('answers 401 without the admin token on every keys route', async () => {
    for (const [method, path] of [
      ['GET', '/v1/keys'],
      ['POST', '/v1/keys'],
      ['GET', '/v1/keys/search'],
      ['PATCH', '/v1/keys/search'],
      ['POST', '/v1/keys/search/revoke'],
    ] as const) {
      const r = await call(method, path, method === 'GET' ? undefined : { owner: 'x' }, { authorization: 'Bearer wrong-token-0123456789' });
      expect(r.status, `${method} ${path}`).toBe(401);
    }
    expect((await call('GET', '/v1/keys/search')).body.owner).toBe('team-search');
  });
});
