// 500 malformed catalogs (seeded) against one running catalog app: wrong types, missing and
// unknown fields, bad sources, huge numbers, broken YAML and JSON, non-object bodies — sent as
// whole catalogs, single models and dry runs, JSON or YAML. None may get a 5xx, every write must
// be refused, and the stored catalog must be exactly what it was. Then the documents that once
// killed the process (nested 20,000 deep, an alias bomb): each is refused naming the limit it
// crossed, and the process answers the next request.
import fc from 'fast-check';
import { stringify } from 'yaml';
import { stopAllSpawned } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCatalogApp, TEST_TOKEN, type CatalogApp } from './test/catalog-app.harness';

const SEED = 20_260_917;
const RUNS = 500;
const AUTH = { authorization: `Bearer ${TEST_TOKEN}` };

const VALID_MODEL = {
  name: 'base',
  aliases: ['base-alias'],
  source: 'hf://org/repo/base.gguf@main',
  size: '1GB',
  replicas: { min: 1, max: 2 },
  profiles: [{ engine: 'llamacpp', memory: '1GiB', args: ['--threads', '2'], env: { A: 'b' } }],
};
const REQUIRED = ['name', 'source', 'size', 'replicas', 'profiles'] as const;

// Values no field of a model accepts in the given place.
const huge = fc.constantFrom(1e20, 2 ** 53 + 2, -1, 1.5, -1e300, 1e300);
const notAString = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 4 }), fc.integer(), { maxKeys: 2 }));
const badName = fc.oneof(notAString, fc.constantFrom('', ' spaced ', '-leading', 'x'.repeat(200), 'tab\tname', 'émoji🙂'));
const badSource = fc.oneof(
  notAString,
  fc.constantFrom('', 'hf://org/repo', 'hf://org', 'http://', 'https://user:pw@h/x', 'file://relative', 'file:///a/../b', 's3://bucket/k', 'ftp://h/x', 'just text', 'file:///'),
  fc.string({ maxLength: 20 }).map((s) => `nope://${s}`),
);
const badSize = fc.oneof(huge, fc.constantFrom(0, '0GB', '1 gigabyte', '16Gb', '-5GB', '1.5', 'GB', true, null, [], {}), fc.string({ maxLength: 6 }).map((s) => `${s}x`));
const badReplicas = fc.oneof(
  huge,
  fc.constantFrom('1', true, null, [], { min: 3, max: 1 }, { min: -1, max: 1 }, { min: 1 }, { max: 1 }, { min: 1, max: 2, extra: 1 }, { min: 1.5, max: 2 }),
);
const badProfiles = fc.oneof(
  fc.constantFrom([], 'llamacpp', null, 7, {}),
  fc.constantFrom(
    [{}],
    [{ engine: 'nope' }],
    [{ engine: 'vllm' }],
    [{ engine: 'llamacpp', nodes: 2 }],
    [{ engine: 'llamacpp', tensorParallel: 2 }],
    [{ engine: 'vllm', gpuClass: 'H100', gpusPerNode: 2, tensorParallel: 3 }],
    [{ engine: 'llamacpp', gpusPerNode: 'x' }],
    [{ engine: 'llamacpp', memory: 'lots' }],
    [{ engine: 'llamacpp', args: 'a b c' }],
    [{ engine: 'llamacpp', env: { 'lower-case': 'x' } }],
    [{ engine: 'llamacpp', env: { A: 1 } }],
    [{ engine: 'llamacpp', contextLength: 1e20 }],
    [{ engine: 'llamacpp', colour: 'red' }],
  ),
);
const unknownKey = fc.stringMatching(/^[a-z]{1,8}$/).filter((k) => !['name', 'aliases', 'source', 'size', 'sha256', 'replicas', 'metrics', 'profiles'].includes(k));

/** One model that is certainly invalid, and whether the fault is a missing name (fixable by a path name). */
const badModel: fc.Arbitrary<{ model: unknown; missingName: boolean }> = fc.oneof(
  badName.map((name) => ({ model: { ...VALID_MODEL, name }, missingName: false })),
  badSource.map((source) => ({ model: { ...VALID_MODEL, source }, missingName: false })),
  badSize.map((size) => ({ model: { ...VALID_MODEL, size }, missingName: false })),
  badReplicas.map((replicas) => ({ model: { ...VALID_MODEL, replicas }, missingName: false })),
  badProfiles.map((profiles) => ({ model: { ...VALID_MODEL, profiles }, missingName: false })),
  fc.constantFrom(...REQUIRED).map((field) => {
    const model: Record<string, unknown> = { ...VALID_MODEL };
    delete model[field];
    return { model, missingName: field === 'name' };
  }),
  unknownKey.map((key) => ({ model: { ...VALID_MODEL, [key]: 1 }, missingName: false })),
  fc.constantFrom({ ...VALID_MODEL, aliases: 'x' }, { ...VALID_MODEL, aliases: ['base'] }, { ...VALID_MODEL, sha256: 'abc' }, { ...VALID_MODEL, metrics: { running: 'bad name' } }).map((model) => ({ model, missingName: false })),
  fc.oneof(notAString, fc.string({ maxLength: 10 })).map((model) => ({ model, missingName: false })),
);

/** A whole catalog document that is certainly invalid. */
const badCatalog: fc.Arbitrary<unknown> = fc.oneof(
  fc.tuple(fc.integer({ min: 0, max: 2 }), badModel).map(([good, bad]) => ({
    models: [...Array.from({ length: good }, (_, i) => ({ ...VALID_MODEL, name: `ok-${i}`, aliases: [] })), bad.model],
  })),
  fc.constantFrom({}, { models: 'x' }, { models: null }, { models: {} }, { models: [], extra: true }, { models: [VALID_MODEL, VALID_MODEL] }),
  fc.oneof(notAString, fc.string({ maxLength: 30 })),
);

/** Raw body text that is not a catalog: broken syntax, or text that parses to something else. */
const badText = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.constantFrom('models: [', '{"models": [', 'models:\n\t- name: a', 'models: []\nmodels: []', '{"models":[],"models":[]}', 'a: &x [*x]', '- - - -', '%YAML 9.9\n---\nmodels: [x', '\u0000\u0001', 'models: !!binary xyz', '[[[[[[[[[['),
  fc.string({ maxLength: 20 }).map((s) => `models:\n  - ${s}: [\n`),
);

/** About 40 KB each: the shapes that aborted the process with V8 "out of memory". */
function hostileDocuments(): { name: string; type: string; text: string; limit: string }[] {
  const levels = 20_000;
  const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
  for (let i = 1; i < 9; i++) laughs.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10).fill(`*${String.fromCharCode(96 + i)}`).join(',')}]`);
  laughs.push('models: *i');
  return [
    { name: 'nested YAML flow sequences', type: 'application/yaml', text: `models: ${'['.repeat(levels)}${']'.repeat(levels)}`, limit: 'maxDepth' },
    { name: 'unclosed nested YAML', type: 'application/yaml', text: `models: ${'['.repeat(levels)}`, limit: 'maxDepth' },
    { name: 'nested YAML block sequences', type: 'application/yaml', text: `models:\n${'- '.repeat(levels)}x\n`, limit: 'maxDepth' },
    { name: 'nested JSON arrays', type: 'application/json', text: `${'['.repeat(levels)}${']'.repeat(levels)}`, limit: 'maxDepth' },
    { name: 'nested JSON objects', type: 'application/json', text: `{"models":[${'{"a":'.repeat(levels / 4)}1${'}'.repeat(levels / 4)}]}`, limit: 'maxDepth' },
    { name: 'a billion-laughs YAML', type: 'application/yaml', text: laughs.join('\n'), limit: 'maxAliases' },
  ];
}

type Case =
  | { kind: 'replace'; text: string; type: string; ifMatch?: string }
  | { kind: 'model'; name: string; text: string; type: string }
  | { kind: 'validate'; text: string; type: string };

const asBody = (value: unknown): fc.Arbitrary<{ text: string; type: string }> =>
  fc.constantFrom('application/json', 'application/yaml').map((type) => ({ type, text: type === 'application/json' ? (JSON.stringify(value) ?? 'null') : stringify(value) }));

const cases: fc.Arbitrary<Case> = fc.oneof(
  fc.tuple(badCatalog.chain(asBody), fc.option(fc.constantFrom('"1"', '*'), { nil: undefined })).map(([body, ifMatch]) => ({ kind: 'replace' as const, ...body, ifMatch })),
  fc.tuple(badText, fc.constantFrom('application/json', 'application/yaml')).map(([text, type]) => ({ kind: 'replace' as const, text, type })),
  badModel
    .filter((m) => !m.missingName)
    .chain((m) => asBody(m.model))
    .map((body) => ({ kind: 'model' as const, name: 'base', ...body })),
  fc.tuple(badText, fc.constantFrom('application/json', 'application/yaml')).map(([text, type]) => ({ kind: 'model' as const, name: 'fresh', text, type })),
  badCatalog.chain(asBody).map((body) => ({ kind: 'validate' as const, ...body })),
);

describe('catalog API fuzz', () => {
  let app: CatalogApp;
  let stored: string;

  beforeAll(async () => {
    app = await startCatalogApp();
    const res = await fetch(`${app.url}/v1/catalog`, {
      method: 'PUT',
      headers: { ...AUTH, 'content-type': 'application/json', 'if-match': '"0"' },
      body: JSON.stringify({ models: [VALID_MODEL] }),
    });
    expect(res.status).toBe(200);
    stored = await res.text();
  });
  afterAll(async () => {
    await app?.stop();
    await stopAllSpawned();
  });

  it(`answers ${RUNS} malformed catalogs with 4xx (dry runs: valid=false), never 5xx, and stores none`, async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const path = c.kind === 'replace' ? '/v1/catalog' : c.kind === 'model' ? `/v1/catalog/models/${c.name}` : '/v1/catalog/validate';
        const method = c.kind === 'validate' ? 'POST' : 'PUT';
        const headers: Record<string, string> = { ...AUTH, 'content-type': c.type };
        if (c.kind === 'replace' && c.ifMatch) headers['if-match'] = c.ifMatch;
        const res = await fetch(`${app.url}${path}`, { method, headers, body: c.text });
        const text = await res.text();
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        if (c.kind === 'validate') {
          expect(res.status, text).toBe(200);
          expect(JSON.parse(text)).toMatchObject({ valid: false, problems: expect.any(Array) });
        } else {
          expect([400, 412, 422], `${res.status} ${text}`).toContain(res.status);
          expect(res.headers.get('content-type')).toBe('application/problem+json');
          const body = JSON.parse(text) as { status: number; problems: unknown[] };
          expect(body.status).toBe(res.status);
          if (res.status !== 412) expect(body.problems.length).toBeGreaterThan(0);
        }
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
    // Every kind of refusal came up, and the catalog is byte for byte what it was.
    expect([...seen.keys()].sort()).toEqual(expect.arrayContaining([200, 400, 422]));
    const after = await fetch(`${app.url}/v1/catalog`, { headers: AUTH });
    expect(after.headers.get('etag')).toBe('"1"');
    expect(await after.text()).toBe(stored);
  }, 180_000);

  it.each(hostileDocuments())('refuses $name with 422 naming the limit, stores nothing, and stays up', async ({ type, text, limit }) => {
    const value = limit === 'maxDepth' ? 32 : 100;
    for (const [method, path] of [
      ['PUT', '/v1/catalog'],
      ['PUT', '/v1/catalog/models/base'],
      ['POST', '/v1/catalog/validate'],
    ] as const) {
      const res = await fetch(`${app.url}${path}`, { method, headers: { ...AUTH, 'content-type': type, 'if-match': '"1"' }, body: text });
      const body = await res.text();
      expect(res.status, `${method} ${path}: ${body.slice(0, 300)}`).toBe(422);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(JSON.parse(body)).toMatchObject({
        type: 'https://llmgw.dev/problems/document-too-complex',
        status: 422,
        detail: `catalog document exceeds the ${limit} limit of ${value}`,
        limit: { name: limit, value },
        problems: [{ path: '', message: expect.stringContaining(`the limit (${limit}) is ${value}`) }],
      });
      // Still up, and serving the next request.
      expect(app.proc.exit).toBeUndefined();
      expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    }
    const after = await fetch(`${app.url}/v1/catalog`, { headers: AUTH });
    expect(after.headers.get('etag')).toBe('"1"');
    expect(await after.text()).toBe(stored);
  });
});
