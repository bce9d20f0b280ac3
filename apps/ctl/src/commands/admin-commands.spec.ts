// `llmgw` commands against a fake controller (and catalog) serving the admin API's documented
// shapes: tables, --json, exit codes, what is sent, and where the connection settings come from.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CliCommand } from '../cli-io';
import { runCtl } from '../test/cli-run';
import { startFakeServer, type FakeServer } from '../test/fake-admin.server';
import { GC_COLLECT, GC_PLAN, NODES, NOW, REPLICAS, STATUS } from '../test/cluster.fixture';
import { createEventsCommand } from './events.command';
import { createExplainCommand } from './explain.command';
import { createGcCommand } from './gc.command';
import { createModelsCommand } from './models.command';
import { createNodeActionCommand } from './node-action.command';
import { createNodeForgetCommand } from './node-forget.command';
import { createNodesCommand } from './nodes.command';
import { createReplicasCommand } from './replicas.command';
import { createStatusCommand } from './status.command';

const TOKEN = 'ctl-test-token-0123456789';
const deps = { now: () => NOW };
const COMMANDS: CliCommand[] = [
  createStatusCommand(deps),
  createNodesCommand(deps),
  createReplicasCommand(deps),
  createModelsCommand(deps),
  createEventsCommand(deps),
  createExplainCommand(deps),
  createNodeActionCommand('cordon', deps),
  createNodeActionCommand('uncordon', deps),
  createNodeActionCommand('drain', deps),
  createNodeForgetCommand(deps),
  createGcCommand(deps),
];

const EVENTS = [
  { id: 9, time: NOW - 60_000, kind: 'placed', model: 'llama-3.1-8b-instruct', replicaId: 'r-llama8b-2', nodeId: 'gpu-h-1', reason: 'profile 0 fits: 1×H100-80GB' },
  { id: 7, time: NOW - 3_600_000, kind: 'lost', replicaId: 'r-old', nodeId: 'gpu-h-9' },
];
const CATALOG = {
  revision: 12,
  models: [
    { name: 'llama-3.1-8b-instruct', aliases: ['llama3-8b'], source: 'hf://m/l@main', size: 16_100_000_000, replicas: { min: 2, max: 3 }, profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 1, nodes: 1 }] },
    { name: 'qwen2.5-0.5b-instruct', aliases: [], source: 'hf://q/q@main', size: 491_000_000, replicas: { min: 1, max: 1 }, profiles: [{ engine: 'llamacpp', gpusPerNode: 0, nodes: 1 }] },
    {
      name: 'llama-3.1-405b-instruct',
      aliases: [],
      source: 'hf://m/big@main',
      size: 410e9,
      replicas: { min: 1, max: 1 },
      endpoints: ['chat'],
      profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 8, nodes: 2 }],
    },
    { name: 'spare', aliases: [], source: 'hf://s/s@main', size: 1e9, replicas: { min: 0, max: 2 }, profiles: [{ engine: 'llamacpp', gpusPerNode: 0, nodes: 1, args: ['--embeddings'] }] },
  ],
};

let controller: FakeServer;
let catalog: FakeServer;
const dir = mkdtempSync(join(tmpdir(), 'llmgw-ctl-admin-'));

beforeAll(async () => {
  controller = await startFakeServer(
    {
      'GET /v1/admin/status': { body: STATUS },
      'GET /v1/admin/nodes': { body: { nodes: NODES } },
      'GET /v1/admin/replicas': (req) => {
        const model = new URL(req.url, 'http://x').searchParams.get('model');
        return { body: { replicas: REPLICAS.filter((r) => model === null || r.model === model) } };
      },
      'GET /v1/admin/events': (req) => {
        const model = new URL(req.url, 'http://x').searchParams.get('model');
        return { body: { events: EVENTS.filter((e) => model === null || e.model === model) } };
      },
      'GET /v1/admin/gc': { body: GC_PLAN },
      'POST /v1/admin/gc/collect': { body: GC_COLLECT },
      'POST /v1/admin/nodes/gpu-h-1/cordon': { body: { node: { ...NODES[0], cordoned: true } } },
      'POST /v1/admin/nodes/gpu-h-1/uncordon': { body: { node: NODES[0] } },
      'POST /v1/admin/nodes/gpu-h-1/drain': { body: { node: { ...NODES[0], cordoned: true, draining: true } } },
      'DELETE /v1/admin/nodes/gpu-h-9': { status: 204 },
      'DELETE /v1/admin/nodes/gpu-h-1': {
        status: 409,
        body: { type: 'https://llmgw.dev/problems/conflict', title: 'Conflict', status: 409, detail: "node 'gpu-h-1' is healthy and connected: only a lost node can be forgotten (stop its agent and wait until the node is lost)" },
      },
      'POST /v1/admin/nodes/nope/cordon': { status: 404, body: { type: 'https://llmgw.dev/problems/not-found', title: 'Not Found', status: 404, detail: "node 'nope' is not known" } },
    },
    TOKEN,
  );
  catalog = await startFakeServer(
    {
      'GET /v1/catalog': { body: CATALOG },
      'GET /v1/catalog/models/llama3-8b': { body: { revision: 12, model: CATALOG.models[0] } },
      'GET /v1/catalog/models/llama-3.1-405b-instruct': { body: { revision: 12, model: CATALOG.models[2] } },
      'GET /v1/catalog/models/gone': { status: 404, body: { status: 404, detail: 'no model "gone"' } },
    },
    TOKEN,
  );
});
afterAll(async () => {
  await controller.close();
  await catalog.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  controller.requests.length = 0;
});

const conn = () => ['--controller', controller.url, '--catalog', catalog.url, '--token', TOKEN];
const run = (...argv: string[]) => runCtl(COMMANDS, [...argv, ...conn()]);

describe('tables', () => {
  it('nodes: state and flags, fabric, GPUs held/total, utilisation and cache free with - for unknown', async () => {
    const r = await run('nodes');
    expect(r.code).toBe(0);
    expect(r.out).toMatchInlineSnapshot(`
      "NODE     STATE                      FABRIC   GPUS (HELD/TOTAL)            GPU UTIL  CACHE FREE  REPLICAS  LAST SEEN
      gpu-h-1  healthy                    ib-east  2/8 H100-80GB                37%       1.2 TB             2  4s ago
      gpu-h-3  healthy,cordoned,draining  ib-west  0/8 H100-80GB (1 unhealthy)  -         -                  0  2s ago
      cpu-1    unreachable,disconnected   -        CPU                          -         320.0 GB           1  -
      "
    `);
    const json = await run('nodes', '--json');
    expect(JSON.parse(json.out)).toEqual({ nodes: NODES });
  });

  it('replicas: where each runs, age, and idle - for a replica no router reported', async () => {
    const r = await run('replicas');
    expect(r.code).toBe(0);
    expect(r.out).toMatchInlineSnapshot(`
      "REPLICA      MODEL                  STATE     NODES:GPUS  RESTARTS  AGE    IDLE  REASON
      r-llama8b-1  llama-3.1-8b-instruct  ready     gpu-h-1:0          0  2h     42s
      r-llama8b-2  llama-3.1-8b-instruct  fetching  gpu-h-1:1          1  5m     -     downloading weights
      r-qwen-1     qwen2.5-0.5b-instruct  ready     cpu-1:cpu          0  4d15h  -
      "
    `);
    await run('replicas', '--model', 'qwen2.5-0.5b-instruct');
    expect(controller.requests.at(-1)?.url).toBe('/v1/admin/replicas?model=qwen2.5-0.5b-instruct');
  });

  it('models: the catalog joined with replicas and the unplaceable list', async () => {
    const r = await run('models');
    expect(r.code).toBe(0);
    expect(r.out).toMatchInlineSnapshot(`
      "catalog revision 12
      MODEL                    ALIASES    WANTED  READY  STARTING  FAILED  STATUS       ENDPOINTS         PROFILES
      llama-3.1-8b-instruct    llama3-8b    2..3      1         1       0  pending      chat,completions  vllm 1×H100-80GB
      qwen2.5-0.5b-instruct    -               1      1         0       0  ok           chat,completions  llamacpp CPU
      llama-3.1-405b-instruct  -               1      0         0       0  unplaceable  chat              vllm 2 nodes × 8×H100-80GB
      spare                    -            0..2      0         0       0  idle         embeddings        llamacpp CPU
      "
    `);
    const json = JSON.parse((await run('models', '--json')).out);
    expect(json.models.map((m: { name: string; status: string; endpoints: string[] }) => [m.name, m.status, m.endpoints])).toEqual([
      ['llama-3.1-8b-instruct', 'pending', ['chat', 'completions']],
      ['qwen2.5-0.5b-instruct', 'ok', ['chat', 'completions']],
      ['llama-3.1-405b-instruct', 'unplaceable', ['chat']],
      ['spare', 'idle', ['embeddings']],
    ]);
  });

  it('events: newest first, filters passed through, a bad limit is a usage error', async () => {
    const r = await run('events', '--node', 'gpu-h-1', '--limit', '20');
    expect(r.code).toBe(0);
    expect(controller.requests.at(-1)?.url).toBe('/v1/admin/events?node=gpu-h-1&limit=20');
    expect(r.out).toMatchInlineSnapshot(`
      "TIME                  KIND    MODEL                  REPLICA      NODE     REASON
      2026-09-17T11:59:00Z  placed  llama-3.1-8b-instruct  r-llama8b-2  gpu-h-1  profile 0 fits: 1×H100-80GB
      2026-09-17T11:00:00Z  lost    -                      r-old        gpu-h-9
      "
    `);
    expect(JSON.parse((await run('events', '--json')).out)).toEqual({ events: EVENTS });
    const bad = await run('events', '--limit', '0');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--limit must be 1..1000');
  });
});

describe('explain', () => {
  it('shows where a model runs and why it is pending, resolving an alias to the name', async () => {
    const r = await run('explain', 'llama3-8b');
    expect(r.code).toBe(0);
    expect(r.out).toMatchInlineSnapshot(`
      "llama-3.1-8b-instruct (aliases: llama3-8b): catalog revision 12, wants 2..3 replicas
        profile 0: vllm 1×H100-80GB (preferred)
      pending: 1 ready of 2 wanted

      REPLICAS
      REPLICA      STATE     PROFILE               NODES:GPUS  RESTARTS  IDLE  REASON
      r-llama8b-1  ready     0 (vllm 1×H100-80GB)  gpu-h-1:0          0  42s
      r-llama8b-2  fetching  0 (vllm 1×H100-80GB)  gpu-h-1:1          1  -     downloading weights

      RECENT EVENTS (newest first)
      TIME                  KIND    REPLICA      NODE     REASON
      2026-09-17T11:59:00Z  placed  r-llama8b-2  gpu-h-1  profile 0 fits: 1×H100-80GB
      "
    `);
    expect(controller.requests.map((q) => q.url)).toEqual(
      expect.arrayContaining(['/v1/admin/replicas?model=llama-3.1-8b-instruct', '/v1/admin/events?model=llama-3.1-8b-instruct&limit=15']),
    );
  });

  it('says why an unplaceable model fits nowhere', async () => {
    const r = await run('explain', 'llama-3.1-405b-instruct');
    expect(r.code).toBe(0);
    expect(r.out).toContain('unplaceable: 0 ready of 1 wanted, and no profile fits anywhere');
    expect(r.out).toContain('WHY IT FITS NOWHERE (4 attempts');
    expect(r.out).toContain('  profile 0 (vllm 2 nodes × 8×H100-80GB):\n    needs 2 whole nodes on one fabric');
    const json = JSON.parse((await run('explain', 'llama-3.1-405b-instruct', '--json')).out);
    expect(json).toMatchObject({ name: 'llama-3.1-405b-instruct', catalogRevision: 12, unplaceable: { attempts: 4 }, replicas: [] });
  });

  it('exits 1 for a model nobody knows, and 2 without a model', async () => {
    const r = await run('explain', 'gone');
    expect(r.code).toBe(1);
    expect(r.err).toBe('llmgw: no model "gone": not in the catalog, no replicas, no events\n');
    expect((await run('explain')).code).toBe(2);
  });
});

describe('cordon, uncordon, drain', () => {
  it.each([
    ['cordon', 'node gpu-h-1: healthy, cordoned; 2 replicas on it\n'],
    ['uncordon', 'node gpu-h-1: healthy, schedulable; 2 replicas on it\n'],
    ['drain', 'node gpu-h-1: healthy, cordoned, draining; 2 replicas still there, being moved\n'],
  ])('%s posts the action and reports the node after it', async (action, line) => {
    const r = await run(action, 'gpu-h-1');
    expect(r).toEqual({ code: 0, out: line, err: '' });
    expect(controller.requests.at(-1)).toMatchObject({ method: 'POST', url: `/v1/admin/nodes/gpu-h-1/${action}` });
    const json = await run(action, 'gpu-h-1', '--json');
    expect(JSON.parse(json.out).node.id).toBe('gpu-h-1');
  });

  it('exits 1 with the controller’s reason for an unknown node, 2 without one', async () => {
    const r = await run('cordon', 'nope');
    expect(r.code).toBe(1);
    expect(r.err).toBe("llmgw: controller: POST /v1/admin/nodes/nope/cordon: 404 node 'nope' is not known\n");
    expect((await run('drain')).code).toBe(2);
  });
});

describe('nodes forget', () => {
  it('sends DELETE for the node and says it is forgotten; --json names it', async () => {
    const r = await run('nodes', 'forget', 'gpu-h-9');
    expect(r).toEqual({ code: 0, out: 'node gpu-h-9 forgotten: its record and node secret are removed; an agent may join under this id again\n', err: '' });
    expect(controller.requests.at(-1)).toMatchObject({ method: 'DELETE', url: '/v1/admin/nodes/gpu-h-9' });
    expect(JSON.parse((await run('nodes', 'forget', 'gpu-h-9', '--json')).out)).toEqual({ forgotten: 'gpu-h-9' });
  });

  it('exits 1 with the controller’s reason for a node that is not lost, 2 without a node; plain `nodes` still lists', async () => {
    const r = await run('nodes', 'forget', 'gpu-h-1');
    expect(r.code).toBe(1);
    expect(r.err).toBe("llmgw: controller: DELETE /v1/admin/nodes/gpu-h-1: 409 node 'gpu-h-1' is healthy and connected: only a lost node can be forgotten (stop its agent and wait until the node is lost)\n");
    expect((await run('nodes', 'forget')).code).toBe(2);
    expect((await run('nodes')).code).toBe(0);
  });
});

describe('gc', () => {
  it('lists, per node, the entries no model wants, with sizes; listing is the default', async () => {
    const r = await run('gc');
    expect(r.code).toBe(0);
    expect(controller.requests.map((q) => `${q.method} ${q.url}`)).toEqual(['GET /v1/admin/gc']);
    expect(r.out).toMatchInlineSnapshot(`
      "NODE                  CACHE ENTRY                                SIZE  MODIFIED
      gpu-h-1               llmgw-0123456789abcdef-old-model.gguf    4.4 GB  2026-09-16T12:00:00Z
      gpu-h-1               llmgw-fedcba9876543210-Llama-2-7b       13.5 GB  2026-09-15T12:00:00Z
      cpu-1 (disconnected)  llmgw-00112233aabbccdd-tiny.gguf       491.0 MB  2026-09-17T11:00:00Z

      3 entries (18.4 GB) on 2 nodes that no model of catalog revision 12 wants.
      Run \`llmgw gc --collect --all\` (or \`--node ID\`, repeatable) to ask the agents to remove them.
      "
    `);
    expect(JSON.parse((await run('gc', '--json')).out)).toEqual(GC_PLAN);
  });

  it('--collect wants --node or --all, and asks the controller for nothing without one', async () => {
    const before = controller.requests.length;
    for (const args of [['--collect'], ['--collect', '--all', '--node', 'cpu-1'], ['--all']]) {
      const r = await run('gc', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toMatch(/^llmgw: .*(--node|--all)/);
    }
    expect(controller.requests.length).toBe(before);
  });

  it('--collect says what it asked for and shows each refusal as a refusal', async () => {
    const r = await run('gc', '--collect', '--all');
    expect(r.code).toBe(0);
    expect(controller.requests.at(-1)).toMatchObject({ method: 'POST', url: '/v1/admin/gc/collect', body: '{"all":true}' });
    expect(controller.requests.at(-1)?.headers['content-type']).toBe('application/json');
    expect(r.out).toMatchInlineSnapshot(`
      "asked to remove 3 entries (18.4 GB) on 2 nodes
        gpu-h-1: removed llmgw-0123456789abcdef-old-model.gguf
        gpu-h-1: refused llmgw-fedcba9876543210-Llama-2-7b: is a symbolic link leading out of the cache directory
        cpu-1: removed llmgw-00112233aabbccdd-tiny.gguf
      removed 2 entries (4.9 GB), 1 refused by the node
      "
    `);
    const json = JSON.parse((await run('gc', '--collect', '--all', '--json')).out);
    expect(json.summary).toEqual({ askedEntries: 3, askedBytes: 18_359_439_584, nodes: 2, removed: 2, removedBytes: 4_859_439_584, refused: 1, notFound: 0, failed: 0, unanswered: 0 });
    await run('gc', '--collect', '--node', 'cpu-1', '--node', 'gpu-h-1');
    expect(JSON.parse(controller.requests.at(-1)?.body ?? '')).toEqual({ nodes: ['cpu-1', 'gpu-h-1'] });
  });

  it('--collect exits 1 when a node did not answer', async () => {
    controller.route('POST /v1/admin/gc/collect', { body: { ...GC_COLLECT, nodes: [{ nodeId: 'cpu-1', asked: ['llmgw-00112233aabbccdd-tiny.gguf'], error: 'no agent stream' }], removedBytes: 0 } });
    try {
      const r = await run('gc', '--collect', '--all');
      expect(r.code).toBe(1);
      expect(r.out).toContain('cpu-1: no answer: no agent stream (1 entry left in place)');
    } finally {
      controller.route('POST /v1/admin/gc/collect', { body: GC_COLLECT });
    }
  });
});

describe('connection settings', () => {
  const statusOnly = [createStatusCommand(deps)];

  it('flags win over the environment, which wins over the config file', async () => {
    const home = join(dir, 'home');
    mkdirSync(join(home, '.config', 'llmgw'), { recursive: true });
    writeFileSync(join(home, '.config', 'llmgw', 'config.yaml'), `controller: ${controller.url}\ntoken: ${TOKEN}\n`);
    // From the default config file alone.
    expect((await runCtl(statusOnly, ['status'], { home })).code).toBe(0);
    // The environment's token overrides the file's (and is wrong here).
    const envWins = await runCtl(statusOnly, ['status'], { home, env: { LLMGW_ADMIN_TOKEN: 'env-token-0123456789' } });
    expect(envWins.code).toBe(1);
    expect(controller.requests.at(-1)?.headers.authorization).toBe('Bearer env-token-0123456789');
    // The flag overrides both.
    expect((await runCtl(statusOnly, ['status', '--token', TOKEN], { home, env: { LLMGW_ADMIN_TOKEN: 'env-token-0123456789' } })).code).toBe(0);
    // LLMGW_CONTROLLER_URL overrides the file's controller.
    const elsewhere = await runCtl(statusOnly, ['status'], { home, env: { LLMGW_CONTROLLER_URL: 'http://127.0.0.1:1' } });
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.err).toContain('cannot reach the controller at http://127.0.0.1:1');
  });

  it('--config FILE must exist and hold only known keys; a bad environment URL is a usage error', async () => {
    const file = join(dir, 'cfg.yaml');
    writeFileSync(file, `controller: ${controller.url}\ntoken: ${TOKEN}\n`);
    expect((await runCtl(statusOnly, ['status', '--config', file])).code).toBe(0);
    const missing = await runCtl(statusOnly, ['status', '--config', join(dir, 'absent.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain('cannot read config file');
    writeFileSync(file, 'controller: ftp://x\ncolour: red\n');
    const bad = await runCtl(statusOnly, ['status', '--config', file]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('controller: expected a URL starting http: or https:');
    expect(bad.err).toContain('colour: unknown key');
    const env = await runCtl(statusOnly, ['status'], { env: { LLMGW_CONTROLLER_URL: 'not a url' } });
    expect(env.code).toBe(2);
    expect(env.err).toContain('LLMGW_CONTROLLER_URL="not a url": expected an absolute URL');
  });
});
