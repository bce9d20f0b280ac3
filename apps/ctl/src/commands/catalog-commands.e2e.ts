// `llmgw catalog get | apply | delete` against the real catalog app (a process on port 0, SQLite),
// `apply --wait` following a rollout reported by a fake controller, and `llmgw keys …`.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '@llmgw/store';
import { inheritedTestEnv, runTsEntry, spawnProcess, stopAllSpawned, type SpawnedProcess } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReplicaView, StatusView } from '../api/admin-api.types';
import { runCtl } from '../test/cli-run';
import { startFakeServer, type FakeServer } from '../test/fake-admin.server';
import { STATUS } from '../test/cluster.fixture';
import { createCatalogApplyCommand } from './catalog-apply.command';
import { createCatalogDeleteCommand } from './catalog-delete.command';
import { createCatalogGetCommand } from './catalog-get.command';
import { KEYS_COMMANDS } from './keys.command';
import { TOKENS_COMMANDS } from './tokens.command';
import { createUsageCommand } from './usage.command';

const TOKEN = 'ctl-e2e-token-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'llmgw-ctl-catalog-'));
let app: SpawnedProcess;
let catalogUrl: string;

/** Fake time for --wait: sleeping advances the clock, so a timeout needs no real waiting. */
let clock = 0;
const deps = { now: () => clock, sleep: async (ms: number) => void (clock += ms) };
const COMMANDS = [createCatalogGetCommand(deps), createCatalogApplyCommand(deps), createCatalogDeleteCommand(deps), ...KEYS_COMMANDS, ...TOKENS_COMMANDS, createUsageCommand()];

function file(name: string, text: string): string {
  writeFileSync(join(dir, name), text);
  return name;
}

const MODEL_A = `  - name: model-a
    aliases: [a]
    source: https://models.example/a.gguf
    size: 1GB
    replicas: 1
    profiles: [{engine: llamacpp}]
`;
const WAIT_YAML = `models:\n  - name: model-w\n    source: https://models.example/w.gguf\n    size: 1GB\n    replicas: 1\n    profiles: [{engine: llamacpp}]\n`;
const MODEL_B = `  - name: model-b
    source: hf://org/b/b.gguf@main
    size: 2GB
    replicas: {min: 2, max: 3}
    profiles: [{engine: llamacpp, memory: 1GiB}]
`;

beforeAll(async () => {
  const inherited = inheritedTestEnv();
  app = await spawnProcess({
    ...runTsEntry('apps/catalog/src/main.ts'),
    name: 'llmgw-catalog',
    cleanEnv: true,
    env: { ...inherited, LLMGW_DATA_DIR: join(dir, 'data'), LLMGW_CATALOG_PORT: '0', LLMGW_CATALOG_ADMIN_TOKEN: TOKEN },
    readyWhen: { stdoutMatch: /llmgw-catalog listening on (http:\/\/127\.0\.0\.1:\d+)/, http: { url: (p) => `${p.readyMatch?.[1]}/readyz` } },
    deadlineMs: 60_000,
  });
  catalogUrl = app.readyMatch?.[1] as string;
});
afterAll(async () => {
  await stopAllSpawned();
  rmSync(dir, { recursive: true, force: true });
});

const run = (argv: string[], controller = 'http://127.0.0.1:1') => runCtl(COMMANDS, [...argv, '--catalog', catalogUrl, '--controller', controller, '--token', TOKEN], { cwd: dir });

describe('llmgw catalog against the catalog API', () => {
  it('applies a file, prints it back as YAML with its revision, and deletes a model', async () => {
    const applied = await run(['catalog', 'apply', '-f', file('v1.yaml', `models:\n${MODEL_A}${MODEL_B}`)]);
    expect(applied).toEqual({ code: 0, out: 'applied catalog revision 1: added model-a, model-b\n', err: '' });

    const again = await run(['catalog', 'apply', '-f', 'v1.yaml']);
    expect(again).toEqual({ code: 0, out: 'unchanged: catalog revision 1 already holds this\n', err: '' });

    const get = await run(['catalog', 'get']);
    expect(get.code).toBe(0);
    expect(get.out).toMatch(/^# llmgw catalog from http:\/\/127\.0\.0\.1:\d+\n/);
    expect(get.out).toContain('\nrevision: 1\nmodels:\n  - name: model-a\n');
    expect(get.out).toContain('size: 2000000000');
    const json = JSON.parse((await run(['catalog', 'get', '--json'])).out);
    expect(json.revision).toBe(1);
    expect(json.models.map((m: { name: string }) => m.name)).toEqual(['model-a', 'model-b']);

    // What `get` printed applies as is: its revision guards the write.
    writeFileSync(join(dir, 'edited.yaml'), get.out.replace('size: 1000000000', 'size: 3000000000'));
    const edited = await run(['catalog', 'apply', '-f', 'edited.yaml']);
    expect(edited).toEqual({ code: 0, out: 'applied catalog revision 2: changed model-a\n', err: '' });

    // The same file again is now stale (it says revision 1): refused, not overwritten.
    writeFileSync(join(dir, 'stale.yaml'), get.out.replace('size: 1000000000', 'size: 4000000000'));
    const stale = await run(['catalog', 'apply', '-f', 'stale.yaml']);
    expect(stale.code).toBe(1);
    expect(stale.err).toBe('llmgw: the catalog changed since revision 1 (now 2): get it again, reapply your edit, and apply\n');

    const deleted = await run(['catalog', 'delete', 'model-b']);
    expect(deleted).toEqual({ code: 0, out: 'deleted model-b: catalog revision 3\n', err: '' });
    expect(JSON.parse((await run(['catalog', 'delete', 'model-b', '--json'])).out)).toEqual({ error: { message: expect.stringContaining('404'), status: 404, problems: [] } });
    const missing = await run(['catalog', 'delete', 'model-b']);
    expect(missing.code).toBe(1);
    expect(missing.err).toBe('llmgw: catalog: DELETE /v1/catalog/models/model-b: 404 no model "model-b" in catalog revision 3\n');
    expect((await run(['catalog', 'delete'])).code).toBe(2);
  }, 60_000);

  it('refuses an invalid file before sending it, listing every problem', async () => {
    const before = JSON.parse((await run(['catalog', 'get', '--json'])).out);
    const r = await run(['catalog', 'apply', '-f', file('bad.yaml', 'models:\n  - name: x\n    size: lots\n    replicas: 1\n    profiles: [{engine: vllm}]\n')]);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/^llmgw: bad\.yaml: invalid catalog: \d+ problems\n/);
    expect(r.err).toContain('  models[0].source: required');
    expect(r.err).toContain('  models[0].size: "lots" is not a size');
    expect(r.err).toContain('  models[0].profiles[0].gpuClass');
    const syntax = await run(['catalog', 'apply', '-f', file('broken.yaml', 'models: [\n')]);
    expect(syntax.code).toBe(1);
    expect(syntax.err).toMatch(/^llmgw: broken\.yaml: cannot parse catalog YAML/);
    const nested = await run(['catalog', 'apply', '-f', file('nested.yaml', `models:\n${'- '.repeat(20_000)}x\n`)]);
    expect(nested.code).toBe(1);
    expect(nested.err).toBe('llmgw: nested.yaml: catalog document exceeds the maxDepth limit of 32\n  the document nests deeper than 32 levels; the limit (maxDepth) is 32\n');
    expect((await run(['catalog', 'apply', '-f', 'absent.yaml'])).err).toMatch(/^llmgw: cannot read absent\.yaml/);
    expect((await run(['catalog', 'apply'])).code).toBe(2);
    expect(JSON.parse((await run(['catalog', 'get', '--json'])).out)).toEqual(before);
  });

  it('--dry-run shows the change and the placement preview, and stores nothing', async () => {
    const before = JSON.parse((await run(['catalog', 'get', '--json'])).out);
    const r = await run(['catalog', 'apply', '--dry-run', '-f', file('dry.yaml', `models:\n${MODEL_B}`)]);
    expect(r.code).toBe(0);
    expect(r.out).toBe(
      'dry.yaml: valid; dry run, nothing stored\n' +
        `against revision ${before.revision}: add model-b; remove model-a\n` +
        'placement preview on 0 nodes:\n' +
        '  model-b: unplaceable, wants 2, has 0\n' +
        '    profile 0 (llamacpp CPU):\n' +
        '      no nodes in inventory\n',
    );
    const json = JSON.parse((await run(['catalog', 'apply', '--dry-run', '--json', '-f', 'dry.yaml'])).out);
    expect(json).toMatchObject({ valid: true, changes: { added: ['model-b'], removed: ['model-a'] }, preview: { nodes: 0 } });
    expect(JSON.parse((await run(['catalog', 'get', '--json'])).out)).toEqual(before);
    expect((await run(['catalog', 'apply', '--dry-run', '--wait', '-f', 'dry.yaml'])).code).toBe(2);
  });

  it('says how to pass a token when the catalog API refuses it', async () => {
    const r = await runCtl(COMMANDS, ['catalog', 'get', '--catalog', catalogUrl, '--token', 'wrong-token-0123456789']);
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      'llmgw: catalog: GET /v1/catalog: 401 the admin token is wrong (pass --token, set LLMGW_ADMIN_TOKEN or `token:` in the config file)\n',
    );
  });
});

describe('llmgw catalog apply --wait', () => {
  let controller: FakeServer;
  let polls = 0;
  /** Replicas the fake controller reports on each poll: progress, then ready. */
  let steps: { revision?: number; replicas: Partial<ReplicaView>[] }[] = [];

  beforeAll(async () => {
    controller = await startFakeServer({}, TOKEN);
    const step = () => steps[Math.min(polls, steps.length - 1)];
    controller.route('GET /v1/admin/status', () => {
      const s = step();
      return { body: { ...STATUS, controller: { ...STATUS.controller, catalogRevision: s.revision }, unplaceable: [] } satisfies StatusView };
    });
    controller.route('GET /v1/admin/replicas', () => {
      const s = step();
      polls++;
      return { body: { replicas: s.replicas } };
    });
  });
  afterAll(() => controller.close());

  it('follows the rollout until every model has its replicas and the removed one is gone', async () => {
    const base: number = JSON.parse((await run(['catalog', 'get', '--json'])).out).revision;
    const next = base + 1;
    steps = [
      { revision: base, replicas: [{ id: 'old', model: 'model-a', state: 'ready' }] },
      { revision: next, replicas: [{ id: 'old', model: 'model-a', state: 'draining' }, { id: 'w1', model: 'model-w', state: 'fetching' }] },
      { revision: next, replicas: [{ id: 'w1', model: 'model-w', state: 'ready' }] },
    ];
    polls = 0;
    const r = await run(['catalog', 'apply', '--wait', '-f', file('wait.yaml', WAIT_YAML)], controller.url);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    // Not a terminal: one block per change, no escape codes.
    expect(r.out).toBe(
      `applied catalog revision ${next}: added model-w; removed model-a\n` +
        `waiting for the controller to load revision ${next} (it has ${base})\n` +
        '  .. model-w: ready 0/1\n' +
        '  .. model-a: removed from the catalog, 1 replica still being torn down\n' +
        `controller runs catalog revision ${next}\n` +
        '  .. model-w: ready 0/1, fetching 1\n' +
        '  .. model-a: removed from the catalog, 1 replica still being torn down\n' +
        `controller runs catalog revision ${next}\n` +
        '  ok model-w: ready 1/1\n' +
        `ready: every model of revision ${next} has its replicas\n`,
    );
  });

  it('gives up at --timeout with exit 1, naming what is missing', async () => {
    polls = 0;
    const base: number = JSON.parse((await run(['catalog', 'get', '--json'])).out).revision;
    steps = [{ revision: base + 1, replicas: [{ id: 'w1', model: 'model-w', state: 'ready' }, { id: 'x1', model: 'model-x', state: 'starting' }] }];
    const body = readFileSync(join(dir, file('wait.yaml', WAIT_YAML)), 'utf8') + '  - name: model-x\n    source: https://models.example/x.gguf\n    size: 1GB\n    replicas: 1\n    profiles: [{engine: llamacpp}]\n';
    const r = await run(['catalog', 'apply', '--wait', '--timeout', '5s', '-f', file('wait2.yaml', body)], controller.url);
    expect(r.code).toBe(1);
    expect(r.err).toBe('llmgw: not ready after 5s: model-x 0/1\n');
    expect(polls).toBeGreaterThanOrEqual(5);
    const json = await run(['catalog', 'apply', '--wait', '--timeout', '2s', '--json', '-f', 'wait2.yaml'], controller.url);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({ applied: false, revision: base + 1, ready: false, progress: { done: false } });
  });
});

describe('llmgw keys against the catalog API', () => {
  it('creates a key printing its secret once, lists, shows, updates and revokes it; the secret never shows again', async () => {
    await run(['catalog', 'apply', '-f', file('keys-catalog.yaml', `models:\n${MODEL_A}`)]);
    const created = await run(['keys', 'create', 'search', '--owner', 'team-search', '--models', 'model-a', '--rpm', '120', '--concurrency', '4', '--json']);
    expect(created.code).toBe(0);
    const { key, secret } = JSON.parse(created.out) as { key: { name: string; limits: Record<string, number> }; secret: string };
    expect(secret).toMatch(/^llmgw-/);
    expect(key).toMatchObject({ name: 'search', limits: { requestsPerMinute: 120, concurrentRequests: 4 } });
    const text = await run(['keys', 'create', 'batch', '--owner', 'ops', '--models', '*']);
    expect(text.out).toMatch(/^batch {2}active {2}owner ops {2}models \* {2}no limits\nsecret \(shown once, store it now\): llmgw-\S+\n$/);

    const list = await run(['keys', 'list']);
    expect(list).toMatchObject({ code: 0, err: '' });
    expect(list.out).toContain('search  active  owner team-search  models model-a  requestsPerMinute=120 concurrentRequests=4\n');
    expect(list.out).not.toContain(secret);

    const updated = await run(['keys', 'update', 'search', '--rpm', 'none', '--tpm', '5000', '--json']);
    expect(JSON.parse(updated.out)).toMatchObject({ revision: 2, limits: { concurrentRequests: 4, tokensPerMinute: 5000 } });
    expect(JSON.parse(updated.out).limits.requestsPerMinute).toBeUndefined();
    expect((await run(['keys', 'update', 'search', '--rpm', 'lots'])).code).toBe(2);
    expect((await run(['keys', 'update', 'search'])).code).toBe(2);

    const bad = await run(['keys', 'create', 'other', '--owner', 'o', '--models', 'no-such-model']);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("models[0]: no model or alias 'no-such-model' in the catalog");

    expect((await run(['keys', 'revoke', 'search'])).out).toMatch(/^search {2}revoked .* revoked \d{4}-/);
    const shown = await run(['keys', 'show', 'search', '--json']);
    expect(JSON.parse(shown.out)).toMatchObject({ state: 'revoked' });
    expect(shown.out).not.toContain(secret);
    expect((await run(['keys', 'show', 'nobody'])).code).toBe(1);
  });
});

describe('llmgw tokens against the catalog API', () => {
  it('creates a read token printing its secret once, lists it without the secret, and revokes it', async () => {
    const created = await run(['tokens', 'create', 'dashboards', '--scope', 'read', '--json']);
    expect(created.code).toBe(0);
    const { token, secret } = JSON.parse(created.out) as { token: { scopes: string[] }; secret: string };
    expect(token.scopes).toEqual(['read']);
    const list = await run(['tokens', 'list']);
    expect(list.out).toMatch(/^dashboards {2}read {2}created \S+\n$/);
    expect(list.out).not.toContain(secret);
    const asReader = await runCtl(COMMANDS, ['keys', 'create', 'x', '--owner', 'o', '--models', '*', '--catalog', catalogUrl, '--controller', 'http://127.0.0.1:1', '--token', secret], { cwd: dir });
    expect(asReader.code).toBe(1);
    expect(asReader.err).toContain("admin token 'dashboards' may not do this (it needs the 'write' scope)");
    expect((await run(['tokens', 'revoke', 'dashboards'])).out).toMatch(/revoked/);
    expect((await run(['tokens', 'create', 'x', '--scope', 'root'])).code).toBe(2);
  });
});

describe('llmgw usage against the catalog API', () => {
  it('sums what the store holds per key, narrows to one key, and refuses a malformed since', async () => {
    const store = await openStore(`sqlite:${join(dir, 'data', 'llmgw.db')}`, { migrate: false });
    const hour = Date.now() - (Date.now() % 3_600_000);
    try {
      await store.keyUsage.add([
        { key: 'search', model: 'model-a', hour, requests: 3, promptTokens: 120, completionTokens: 30 },
        { key: 'search', model: 'model-b', hour: hour - 3_600_000, requests: 1, promptTokens: 10, completionTokens: 5 },
        { key: 'batch', model: 'model-a', hour, requests: 2, promptTokens: 7, completionTokens: 1 },
        { key: 'batch', model: 'model-a', hour: hour - 48 * 3_600_000, requests: 100, promptTokens: 100, completionTokens: 100 },
      ]);
    } finally {
      await store.close();
    }
    const all = await run(['usage']);
    expect(all.code).toBe(0);
    expect(all.out).toContain('batch  2 requests  7 prompt + 1 completion tokens  (model-a)\n');
    expect(all.out).toContain('search  4 requests  130 prompt + 35 completion tokens  (model-a, model-b)\n');
    const one = JSON.parse((await run(['usage', '--key', 'batch', '--since', '7d', '--json'])).out);
    expect(one.totals).toEqual([{ key: 'batch', requests: 102, promptTokens: 107, completionTokens: 101 }]);
    const bad = await run(['usage', '--since', 'yesterday']);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('since "yesterday"');
  });
});
