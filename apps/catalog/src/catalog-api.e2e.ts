// The catalog REST API as a real process on port 0, on SQLite and PostgreSQL: revisions with
// ETag/If-Match, every problem as problem+json with nothing stored, YAML bodies, revisions and
// restore, the admin token, the body limit, single-model edits and concurrent writers.
import { ErrorCode, HTTP_STATUS_OF } from '@llmgw/domain';
import { openStore, type Store } from '@llmgw/store';
import { stopAllSpawned, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPENAPI_DOCUMENT } from './api/openapi.document';
import { startCatalogApp, TEST_TOKEN, type CatalogApp } from './test/catalog-app.harness';

const BODY_LIMIT = 16 * 1024;
const AUTH = { authorization: `Bearer ${TEST_TOKEN}` };

interface Answer {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON under test
}

function model(name: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, source: `https://models.example/${name}.gguf`, size: '1GB', replicas: 1, profiles: [{ engine: 'llamacpp' }], ...over };
}

const YAML_CATALOG = `# a comment, which JSON could not carry
models:
  - name: yaml-model
    aliases: [ym]
    source: hf://org/repo/yaml-model.gguf@main
    size: 2GB
    replicas: {min: 1, max: 2}
    profiles:
      - engine: llamacpp
        memory: 1GiB
`;

afterAll(() => stopAllSpawned());

describe.each(testBackends())('catalog API on $name', (backend) => {
  let db: TestDatabase;
  let app: CatalogApp;

  beforeAll(async () => {
    db = await backend.create();
    app = await startCatalogApp({ databaseUrl: db.url, env: { LLMGW_CATALOG_BODY_LIMIT: String(BODY_LIMIT) } });
  });
  afterAll(async () => {
    await app?.stop();
    await db?.drop();
  });

  async function call(method: string, path: string, init: { body?: unknown; type?: string; headers?: Record<string, string>; auth?: boolean } = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...(init.auth === false ? {} : AUTH), ...init.headers };
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] = init.type ?? 'application/json';
    }
    const res = await fetch(`${app.url}${path}`, { method, headers, body });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    return { status: res.status, headers: res.headers, body: type.includes('json') && text ? JSON.parse(text) : text };
  }

  async function current(): Promise<{ revision: number; models: { name: string }[] }> {
    const r = await call('GET', '/v1/catalog');
    expect(r.status).toBe(200);
    return r.body;
  }

  it('answers 401 problem+json on every catalog route without the token or with a wrong one', async () => {
    const routes: [string, string][] = [
      ['GET', '/v1/catalog'],
      ['PUT', '/v1/catalog'],
      ['POST', '/v1/catalog/validate'],
      ['GET', '/v1/catalog/models/x'],
      ['PUT', '/v1/catalog/models/x'],
      ['DELETE', '/v1/catalog/models/x'],
      ['GET', '/v1/catalog/revisions'],
      ['GET', '/v1/catalog/revisions/1'],
      ['POST', '/v1/catalog/revisions/1/restore'],
    ];
    for (const [method, path] of routes) {
      for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }, { authorization: TEST_TOKEN }] as Record<string, string>[]) {
        const r = await call(method, path, { auth: false, headers, ...(method === 'PUT' ? { body: { models: [model('sneaky')] } } : {}) });
        expect(r.status, `${method} ${path}`).toBe(401);
        expect(r.headers.get('content-type')).toBe('application/problem+json');
        expect(r.headers.get('www-authenticate')).toMatch(/^Bearer /);
        expect(r.body).toMatchObject({ type: 'https://llmgw.dev/problems/unauthorized', status: 401, problems: [] });
      }
    }
    expect((await current()).models.map((m) => m.name)).not.toContain('sneaky');
  });

  it('answers a domain code with the status and type every llmgw REST API gives it (the admin API e2e holds the same)', async () => {
    const unauthenticated = await call('GET', '/v1/catalog', { auth: false, headers: { authorization: 'Bearer wrong-token-0123456789' } });
    expect(unauthenticated).toMatchObject({ status: HTTP_STATUS_OF[ErrorCode.Unauthenticated], body: { code: 'unauthenticated', type: 'https://llmgw.dev/problems/unauthorized' } });
    const missing = await call('GET', '/v1/catalog/models/no-such-model');
    expect(missing).toMatchObject({ status: HTTP_STATUS_OF[ErrorCode.NotFound], body: { code: 'not_found', type: 'https://llmgw.dev/problems/not-found' } });
  });

  it('creates the first catalog with If-Match "0", tags every answer with its revision, and refuses a stale write with 412', async () => {
    const empty = await call('GET', '/v1/catalog');
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ revision: 0, models: [] });
    expect(empty.headers.get('etag')).toBe('"0"');

    const created = await call('PUT', '/v1/catalog', { body: { models: [model('alpha')] }, headers: { 'if-match': '"0"' } });
    expect(created.status).toBe(200);
    expect(created.headers.get('etag')).toBe('"1"');
    expect(created.body.revision).toBe(1);
    expect(created.body.models).toEqual([
      {
        name: 'alpha',
        aliases: [],
        source: 'https://models.example/alpha.gguf',
        size: 1_000_000_000,
        replicas: { min: 1, max: 1 },
        profiles: [{ engine: 'llamacpp', gpusPerNode: 0, nodes: 1, tensorParallel: 1, pipelineParallel: 1, args: [], env: {} }],
      },
    ]);
    const read = await call('GET', '/v1/catalog');
    expect(read.headers.get('etag')).toBe('"1"');
    expect(read.body).toEqual(created.body);

    // Replace with the current tag: accepted.
    const replaced = await call('PUT', '/v1/catalog', { body: { models: [model('alpha'), model('beta')] }, headers: { 'if-match': '"1"' } });
    expect(replaced.status).toBe(200);
    expect(replaced.headers.get('etag')).toBe('"2"');

    // The same write again, now stale: 412 naming the current revision, nothing stored.
    const stale = await call('PUT', '/v1/catalog', { body: { models: [model('gamma')] }, headers: { 'if-match': '"1"' } });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('content-type')).toBe('application/problem+json');
    expect(stale.headers.get('etag')).toBe('"2"');
    expect(stale.body).toMatchObject({ type: 'https://llmgw.dev/problems/precondition-failed', status: 412, currentRevision: 2 });
    const after = await current();
    expect(after.revision).toBe(2);
    expect(after.models.map((m) => m.name)).toEqual(['alpha', 'beta']);

    // A tag list matches if it names the current revision; `*` needs an existing catalog.
    expect((await call('PUT', '/v1/catalog', { body: { models: [model('alpha'), model('beta')] }, headers: { 'if-match': '"1", "2"' } })).status).toBe(200);
    expect((await call('PUT', '/v1/catalog', { body: { models: [model('alpha'), model('beta')] }, headers: { 'if-match': '*' } })).status).toBe(200);
    // Malformed tags are a 400, not a silent unconditional write.
    for (const tag of ['3', 'W/"4"', '"x"', '']) {
      const r = await call('PUT', '/v1/catalog', { body: { models: [] }, headers: { 'if-match': tag } });
      expect(r.status, `If-Match ${JSON.stringify(tag)}`).toBe(400);
      expect(r.body.problems).toEqual([{ path: 'If-Match', message: expect.any(String) }]);
    }
    expect((await current()).models.map((m) => m.name)).toEqual(['alpha', 'beta']);
  });

  it('refuses an invalid catalog with 422 problem+json listing every problem, and stores nothing', async () => {
    const before = await current();
    const r = await call('PUT', '/v1/catalog', {
      body: {
        models: [
          model('ok'),
          { name: 'bad name!', source: 'ftp://x/y', size: 'lots', replicas: { min: 3, max: 1 }, profiles: [{ engine: 'vllm' }], colour: 'red' },
          model('ok'),
          42,
        ],
      },
    });
    expect(r.status).toBe(422);
    expect(r.headers.get('content-type')).toBe('application/problem+json');
    expect(r.body).toMatchObject({ type: 'https://llmgw.dev/problems/invalid-catalog', title: 'Invalid catalog', status: 422 });
    const paths = (r.body.problems as { path: string; message: string }[]).map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining(['models[1].name', 'models[1].source', 'models[1].size', 'models[1].colour', 'models[2].name', 'models[3]']),
    );
    expect(paths.some((p) => p.startsWith('models[1].replicas'))).toBe(true);
    expect(paths.some((p) => p.startsWith('models[1].profiles[0]'))).toBe(true);
    expect(r.body.detail).toBe(`${paths.length} problems; nothing was stored`);
    expect(await current()).toEqual(before);
  });

  it('accepts YAML bodies and answers unparseable ones with 400 naming every syntax error', async () => {
    const before = await current();
    const r = await call('PUT', '/v1/catalog', { body: YAML_CATALOG, type: 'application/yaml', headers: { 'if-match': `"${before.revision}"` } });
    expect(r.status).toBe(200);
    expect(r.body.models).toEqual([expect.objectContaining({ name: 'yaml-model', aliases: ['ym'], size: 2_000_000_000, replicas: { min: 1, max: 2 } })]);

    const badYaml = await call('PUT', '/v1/catalog', { body: 'models:\n  - name: [unclosed\n  bad: : :\n', type: 'application/yaml' });
    expect(badYaml.status).toBe(400);
    expect(badYaml.body).toMatchObject({ type: 'https://llmgw.dev/problems/unparseable-body', status: 400 });
    expect(badYaml.body.problems.length).toBeGreaterThan(0);
    expect(badYaml.body.problems[0].message).toMatch(/^line \d+, column \d+: /);

    const badJson = await call('PUT', '/v1/catalog', { body: '{"models": [', type: 'application/json' });
    expect(badJson.status).toBe(400);
    const dupJson = await call('PUT', '/v1/catalog', { body: '{"models": [], "models": []}', type: 'application/json; charset=utf-8' });
    expect(dupJson.status).toBe(400);

    const text = await call('PUT', '/v1/catalog', { body: 'models: []', type: 'text/plain' });
    expect(text.status).toBe(415);
    expect(text.body.type).toBe('https://llmgw.dev/problems/unsupported-media-type');
    const latin1 = await call('PUT', '/v1/catalog', { body: '{"models": []}', type: 'application/json; charset=iso-8859-1' });
    expect(latin1.status).toBe(415);
    expect((await current()).revision).toBe(r.body.revision);
  });

  it('refuses a body over the limit with 413, declared or streamed, and stores nothing', async () => {
    const before = await current();
    const big = JSON.stringify({ models: [model('big', { aliases: Array.from({ length: 2000 }, (_, i) => `alias-${i}`) })] });
    expect(big.length).toBeGreaterThan(BODY_LIMIT);
    const declared = await call('PUT', '/v1/catalog', { body: big });
    expect(declared.status).toBe(413);
    expect(declared.headers.get('content-type')).toBe('application/problem+json');
    expect(declared.body).toMatchObject({ type: 'https://llmgw.dev/problems/body-too-large', status: 413 });

    // Chunked, no Content-Length: refused once the bytes read pass the limit.
    const encoder = new TextEncoder();
    const chunks = big.match(/[\s\S]{1,1000}/g) as string[];
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(encoder.encode(next));
      },
    });
    const res = await fetch(`${app.url}/v1/catalog`, {
      method: 'PUT',
      headers: { ...AUTH, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { status: number }).status).toBe(413);

    const validate = await call('POST', '/v1/catalog/validate', { body: big });
    expect(validate.status).toBe(413);
    expect(await current()).toEqual(before);
  });

  it('lists revisions newest first, serves one, and restores an old one as a new revision', async () => {
    const start = await current();
    const a = await call('PUT', '/v1/catalog', { body: { models: [model('rev-a')] } });
    const b = await call('PUT', '/v1/catalog', { body: { models: [model('rev-b')] }, headers: { 'llmgw-author': 'alice@example' } });
    expect([a.body.revision, b.body.revision]).toEqual([start.revision + 1, start.revision + 2]);

    const list = await call('GET', '/v1/catalog/revisions?limit=2');
    expect(list.status).toBe(200);
    expect(list.body.currentRevision).toBe(b.body.revision);
    expect(list.body.revisions).toEqual([
      { revision: b.body.revision, author: 'alice@example', createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), current: true },
      { revision: a.body.revision, author: 'admin', createdAt: expect.any(String), current: false },
    ]);
    expect((await call('GET', '/v1/catalog/revisions?limit=0')).status).toBe(400);
    expect((await call('GET', '/v1/catalog/revisions?limit=abc')).status).toBe(400);

    const one = await call('GET', `/v1/catalog/revisions/${a.body.revision}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ revision: a.body.revision, author: 'admin', models: [expect.objectContaining({ name: 'rev-a' })] });
    expect((await call('GET', '/v1/catalog/revisions/99999')).status).toBe(404);
    expect((await call('GET', '/v1/catalog/revisions/0')).status).toBe(400);

    // A stale If-Match stops the restore; the current one lets it through.
    const stale = await call('POST', `/v1/catalog/revisions/${a.body.revision}/restore`, { headers: { 'if-match': `"${a.body.revision}"` } });
    expect(stale.status).toBe(412);
    const restored = await call('POST', `/v1/catalog/revisions/${a.body.revision}/restore`, { headers: { 'if-match': `"${b.body.revision}"` } });
    expect(restored.status).toBe(200);
    expect(restored.headers.get('etag')).toBe(`"${b.body.revision + 1}"`);
    expect(restored.body).toMatchObject({ revision: b.body.revision + 1, restoredFrom: a.body.revision });
    expect(restored.body.models).toEqual(a.body.models);
    expect(await current()).toEqual({ revision: b.body.revision + 1, models: a.body.models });
    expect((await call('POST', '/v1/catalog/revisions/99999/restore')).status).toBe(404);
  });

  it('reads, creates, replaces and deletes single models', async () => {
    await call('PUT', '/v1/catalog', { body: { models: [model('m1', { aliases: ['m-one'] }), model('org/m2')] } });

    const byName = await call('GET', '/v1/catalog/models/m1');
    expect(byName.status).toBe(200);
    expect(byName.body.model).toMatchObject({ name: 'm1', aliases: ['m-one'] });
    expect(byName.headers.get('etag')).toBe(`"${byName.body.revision}"`);
    expect((await call('GET', '/v1/catalog/models/m-one')).body.model.name).toBe('m1');
    expect((await call('GET', `/v1/catalog/models/${encodeURIComponent('org/m2')}`)).body.model.name).toBe('org/m2');
    const missing = await call('GET', '/v1/catalog/models/nope');
    expect(missing.status).toBe(404);
    expect(missing.body.type).toBe('https://llmgw.dev/problems/not-found');

    // Create (201; the name comes from the path), replace (200), as YAML too.
    const created = await call('PUT', '/v1/catalog/models/m3', { body: { source: 'https://h/m3.gguf', size: 5, replicas: 2, profiles: [{ engine: 'llamacpp' }] } });
    expect(created.status).toBe(201);
    expect(created.body.model).toMatchObject({ name: 'm3', size: 5, replicas: { min: 2, max: 2 } });
    expect(created.headers.get('etag')).toBe(`"${created.body.revision}"`);
    const replaced = await call('PUT', '/v1/catalog/models/m3', {
      body: 'name: m3\nsource: https://h/m3.gguf\nsize: 6\nreplicas: 0\nprofiles: [{engine: llamacpp}]\n',
      type: 'application/yaml',
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.model).toMatchObject({ name: 'm3', size: 6 });
    expect((await current()).models.map((m) => m.name)).toEqual(['m1', 'org/m2', 'm3']);

    // Problems are relative to the model body; clashes with other models say so.
    const invalid = await call('PUT', '/v1/catalog/models/m4', { body: { source: 'https://h/m4', size: -1, replicas: 1, aliases: ['m1'], profiles: [{ engine: 'llamacpp', gpusPerNode: 'x' }] } });
    expect(invalid.status).toBe(422);
    expect(invalid.body.problems.map((p: { path: string }) => p.path)).toEqual(expect.arrayContaining(['size', 'aliases[0]', 'profiles[0].gpusPerNode']));
    const renamed = await call('PUT', '/v1/catalog/models/m4', { body: model('other') });
    expect(renamed.status).toBe(422);
    expect(renamed.body.problems).toEqual([{ path: 'name', message: expect.stringContaining('"m4"') }]);
    const notAMapping = await call('PUT', '/v1/catalog/models/m4', { body: '[1, 2]' });
    expect(notAMapping.status).toBe(422);

    // A stale If-Match on a model write is 412, not retried.
    const rev = (await current()).revision;
    const stale = await call('PUT', '/v1/catalog/models/m1', { body: model('m1', { size: 7 }), headers: { 'if-match': `"${rev - 1}"` } });
    expect(stale.status).toBe(412);
    expect(stale.body.currentRevision).toBe(rev);

    // Delete by name; an alias is not enough; a second delete is 404.
    const byAlias = await call('DELETE', '/v1/catalog/models/m-one');
    expect(byAlias.status).toBe(404);
    expect(byAlias.body.detail).toContain('alias of "m1"');
    const deleted = await call('DELETE', '/v1/catalog/models/m1');
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ revision: rev + 1, deleted: 'm1' });
    expect(deleted.headers.get('etag')).toBe(`"${rev + 1}"`);
    expect((await call('DELETE', '/v1/catalog/models/m1')).status).toBe(404);
    expect((await current()).models.map((m) => m.name)).toEqual(['org/m2', 'm3']);
  });

  it('lets exactly one of several writers with the same If-Match win', async () => {
    const { revision } = await current();
    const writers = Array.from({ length: 6 }, (_, i) =>
      call('PUT', '/v1/catalog', { body: { models: [model(`writer-${i}`)] }, headers: { 'if-match': `"${revision}"` } }),
    );
    const answers = await Promise.all(writers);
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([200, 412, 412, 412, 412, 412]);
    const winner = answers.find((a) => a.status === 200) as Answer;
    const after = await current();
    expect(after).toEqual({ revision: revision + 1, models: winner.body.models });
  });

  it('loses no update when single-model writers without If-Match race', async () => {
    await call('PUT', '/v1/catalog', { body: { models: [] } });
    const names = Array.from({ length: 6 }, (_, i) => `racer-${i}`);
    const answers = await Promise.all(names.map((name) => call('PUT', `/v1/catalog/models/${name}`, { body: model(name) })));
    // Each either won (201) or, after losing every retry, said so (409) — never a silent loss.
    for (const a of answers) expect([201, 409]).toContain(a.status);
    const stored = (await current()).models.map((m) => m.name).sort();
    const won = names.filter((_, i) => answers[i].status === 201).sort();
    expect(stored).toEqual(won);
    expect(won.length).toBeGreaterThan(0);
  });

  it('validates without storing: every problem, or the change and a placement preview on the stored inventory', async () => {
    const store: Store = await openStore(db.url);
    try {
      await store.nodes.upsert({
        id: 'gpu-1',
        address: '10.0.0.1',
        labels: {},
        fabric: 'ib-a',
        gpus: [0, 1].map((index) => ({ index, uuid: `GPU-${index}`, name: 'NVIDIA L4', gpuClass: 'L4', memoryTotalBytes: 24e9, healthy: true })),
        cpuCores: 16,
        memoryBytes: 64e9,
        cache: { dir: '/var/cache/llmgw', totalBytes: 500e9, freeBytes: 400e9, entries: [] },
        state: 'healthy',
        cordoned: false,
      });
    } finally {
      await store.close();
    }
    await call('PUT', '/v1/catalog', { body: { models: [model('keep'), model('drop')] } });
    const before = await current();

    const invalid = await call('POST', '/v1/catalog/validate', { body: { models: [{ name: 'x' }, 'y'] } });
    expect(invalid.status).toBe(200);
    expect(invalid.body.valid).toBe(false);
    expect(invalid.body.problems.map((p: { path: string }) => p.path)).toEqual(expect.arrayContaining(['models[0].source', 'models[0].size', 'models[1]']));
    const unparseable = await call('POST', '/v1/catalog/validate', { body: 'models: [', type: 'application/yaml' });
    expect(unparseable.status).toBe(200);
    expect(unparseable.body).toMatchObject({ valid: false, problems: [{ path: '', message: expect.stringMatching(/^line \d+/) }] });

    const candidate = {
      models: [
        model('keep'),
        model('on-l4', { replicas: 2, profiles: [{ engine: 'vllm', gpuClass: 'L4' }] }),
        model('on-h100', { profiles: [{ engine: 'vllm', gpuClass: 'H100' }] }),
      ],
    };
    const valid = await call('POST', '/v1/catalog/validate', { body: candidate });
    expect(valid.status).toBe(200);
    expect(valid.body).toMatchObject({
      valid: true,
      problems: [],
      changes: { added: ['on-h100', 'on-l4'], removed: ['drop'], changed: [], currentRevision: before.revision },
    });
    expect(valid.body.preview.nodes).toBe(1);
    const byModel = Object.fromEntries(valid.body.preview.models.map((m: { model: string }) => [m.model, m]));
    expect(byModel['on-l4']).toMatchObject({
      wanted: 2,
      existing: 0,
      outcome: 'fits',
      placements: [
        { profileIndex: 0, profile: 'vllm 1×L4', members: [{ nodeId: 'gpu-1', gpuIndices: [expect.any(Number)] }] },
        { profileIndex: 0, profile: 'vllm 1×L4', members: [{ nodeId: 'gpu-1', gpuIndices: [expect.any(Number)] }] },
      ],
    });
    expect(byModel['on-h100'].outcome).toBe('unplaceable');
    expect(byModel['on-h100'].unplaceable.summary).toContain('H100');
    expect(await current()).toEqual(before);
  });

  it('serves an OpenAPI document naming every route, and a docs page', async () => {
    const doc = await call('GET', '/openapi.json', { auth: false });
    expect(doc.status).toBe(200);
    expect(doc.body).toEqual(JSON.parse(JSON.stringify(OPENAPI_DOCUMENT)));
    const page = await fetch(`${app.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    for (const path of Object.keys(OPENAPI_DOCUMENT.paths)) expect(html).toContain(`<code>${path}</code>`);
    expect(html).not.toMatch(/<script|https?:\/\/(?!llmgw\.dev)/);
  });

  it('never answers 500 for an unknown route or method', async () => {
    for (const [method, path] of [
      ['GET', '/v1/catalog/unknown'],
      ['PATCH', '/v1/catalog'],
      ['GET', '/v1/catalog/models/%E0%A4%A'],
    ]) {
      const r = await call(method, path);
      expect(r.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.headers.get('content-type')).toBe('application/problem+json');
    }
  });
});
