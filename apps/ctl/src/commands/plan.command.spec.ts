import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixturePath } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli';
import type { CliIo } from '../cli-io';
import { COMMANDS } from './index';
import { parseInventory, planCommand, type Plan } from './plan.command';

const CATALOG = fixturePath('llmgw-plan', 'plan-catalog.yaml');
const UNPLACEABLE = fixturePath('llmgw-plan', 'plan-catalog-unplaceable.yaml');
const INVENTORY = fixturePath('llmgw-plan', 'plan-inventory.json');
const INVALID_INVENTORY = fixturePath('llmgw-plan', 'plan-inventory-invalid.json');

const dir = mkdtempSync(join(tmpdir(), 'llmgw-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  writeFileSync(join(dir, name), text);
  return name;
}

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => (out += t), err: (t) => (err += t), isTTY: false, cwd: dir };
  const code = await runCli([planCommand], argv, io);
  return { code, out, err };
}

describe('llmgw plan', () => {
  it('is registered', () => {
    expect(COMMANDS).toContain(planCommand);
  });

  it('shows where every wanted replica goes, then capacity and free whole nodes after', async () => {
    const r = await run('plan', '--catalog', CATALOG, '--inventory', INVENTORY);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const lines = r.out.split('\n').map((l) => l.replace(/\s+/g, ' ').trim());
    expect(lines[0]).toBe('plan: 5 models, 7 replicas wanted — 7 placed, 0 cannot be placed');
    expect(lines).toEqual(
      expect.arrayContaining([
        'MODEL REPLICA PROFILE WHERE',
        'llama-405b 1/1 #0 vllm 2 nodes × 8×H100-80GB h100-a1:0-7 h100-a2:0-7',
        // No replica of llama-8b anywhere yet, so bin-packing decides: h100-b1 has the fewest free cards left.
        'llama-8b 1/2 #0 vllm 1×H100-80GB h100-b1:2',
        // No H100 left: the fallback profile, on a node that already holds the weights (its disk is too small otherwise).
        'llama-8b 2/2 #1 vllm 1×A100-80GB a100-1:0',
        // CPU replicas spread, most free host memory first.
        'qwen-small 1/3 #0 llamacpp CPU h100-a1:cpu',
        'qwen-small 2/3 #0 llamacpp CPU h100-a2:cpu',
        'qwen-small 3/3 #0 llamacpp CPU h100-b1:cpu',
        'mistral-local 1/1 #1 llamacpp CPU a100-1:cpu',
        'CLASS TOTAL USED FREE UNHEALTHY UNAVAILABLE',
        'A100-80GB 2 1 1 0 0',
        'H100-80GB 20 19 0 1 0',
        'FABRIC NODES FREE',
        'ib-a 2 0',
        'ib-b 1 0',
      ]),
    );
    expect(r.out).not.toMatch(/idle/);
  });

  it('--json gives the same plan as an object', async () => {
    const r = await run('plan', '--catalog', CATALOG, '--inventory', INVENTORY, '--json');
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.out) as Plan;
    expect({ wanted: plan.wanted, placed: plan.placed, unplaceable: plan.unplaceable }).toEqual({ wanted: 7, placed: 7, unplaceable: 0 });
    expect(plan.replicas[0]).toEqual({
      model: 'llama-405b',
      replica: 1,
      ok: true,
      profileIndex: 0,
      engine: 'vllm',
      profile: 'vllm 2 nodes × 8×H100-80GB',
      members: [
        { nodeId: 'h100-a1', rank: 0, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] },
        { nodeId: 'h100-a2', rank: 1, gpuIndices: [0, 1, 2, 3, 4, 5, 6, 7] },
      ],
    });
    expect(plan.replicas.map((x) => (x.ok ? x.members.map((m) => m.nodeId).join('+') : '!'))).toEqual([
      'h100-a1+h100-a2',
      'h100-b1',
      'a100-1',
      'h100-a1',
      'h100-a2',
      'h100-b1',
      'a100-1',
    ]);
    expect(plan.capacity).toEqual([
      { gpuClass: 'A100-80GB', total: 2, used: 1, free: 1, unhealthy: 0, unavailable: 0 },
      { gpuClass: 'H100-80GB', total: 20, used: 19, free: 0, unhealthy: 1, unavailable: 0 },
    ]);
    expect(plan.fabrics).toEqual([
      { fabric: 'ib-a', nodes: 2, freeNodes: 0 },
      { fabric: 'ib-b', nodes: 1, freeNodes: 0 },
    ]);
  });

  it('says why a replica cannot be placed, per profile and node, and exits 1', async () => {
    const r = await run('plan', '--catalog', UNPLACEABLE, '--inventory', INVENTORY);
    expect(r.code).toBe(1);
    expect(r.out.split('\n')[0]).toBe('plan: 3 models, 4 replicas wanted — 0 placed, 4 cannot be placed');
    const lines = r.out.split('\n').map((l) => l.trim());
    expect(lines).toEqual(
      expect.arrayContaining([
        'b200-only replicas 1, 2:',
        'profile 0 (vllm 1×B200):',
        'wants class B200, node has H100-80GB: h100-a1, h100-a2, h100-b1',
        'wants class B200, node has A100-80GB: a100-1',
        'wants class B200, node has no GPUs: cpu-1',
        'node cordoned: cpu-2',
        'node unreachable: cpu-3',
        'only 2 nodes with 8 free GPUs in fabric ib-a, needs 3',
        'no fabric (multi-node): a100-1, cpu-1',
        'needs 8 free GPUs, has 1 (1 unhealthy): h100-b1',
        'disk: needs 5000.0 GB, 9.2 GB free: a100-1',
      ]),
    );
    // Nothing placed: all capacity is still free.
    expect(r.out).toMatch(/^\s+ib-a\s+2\s+2$/m);
  });

  it('--json lists each refused replica with its summary and every reason', async () => {
    const r = await run('plan', '--catalog', UNPLACEABLE, '--inventory', INVENTORY, '--json');
    expect(r.code).toBe(1);
    const plan = JSON.parse(r.out) as Plan;
    const huge = plan.replicas.find((x) => x.model === 'huge-cpu');
    expect(huge && !huge.ok && huge.reasons).toContainEqual({ profileIndex: 0, nodeId: 'cpu-1', reason: 'disk: needs 5000.0 GB, 100.0 GB free' });
    expect(huge && !huge.ok && huge.summary.split('\n')[0]).toBe('model huge-cpu: no profile fits');
  });

  it('reports every inventory problem with its path, exit 1', async () => {
    const r = await run('plan', '--catalog', CATALOG, '--inventory', INVALID_INVENTORY);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err.split('\n')).toEqual([
      `${INVALID_INVENTORY}: invalid inventory: 10 problems`,
      '  nodes[0].state: must be one of healthy, unreachable, lost (got "sleeping")',
      '  nodes[0].memory: "lots" is not a size: use bytes or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB (e.g. "16GB", "15.5GiB")',
      '  nodes[0].gpus[0].memoryUsed: is larger than memoryTotal',
      '  nodes[0].gpus[1].index: duplicate GPU index 0 (also nodes[0].gpus[0])',
      '  nodes[0].gpus[1].healthy: must be true or false (got "yes")',
      '  nodes[1].id: duplicate node id "n1" (also nodes[0])',
      '  nodes[1].cordon: unknown field (expected one of: id, address, labels, fabric, state, cordoned, cpuCores, memory, memoryBytes, cache, gpus)',
      '  nodes[2].id: required',
      '  nodes[2].cache: required: {free, total?, dir?, entries?}',
      '  allocations[0].nodeId: no node "ghost" in nodes',
      '',
    ]);
  });

  it('reports catalog and inventory problems together; --json names the file of each', async () => {
    const badCatalog = file('bad-catalog.yaml', 'models:\n  - name: x\n    source: hf://o/x@main\n    size: 1GB\n    replicas: 1\n    profiles: [{engine: vllm}]\n');
    const badInventory = file('bad-inventory.json', JSON.stringify({ nodes: [{ id: 'a', memory: '1TB', cache: { free: '1TB' }, gpus: { name: 'H100' } }] }));
    const text = await run('plan', '--catalog', badCatalog, '--inventory', badInventory);
    expect(text.code).toBe(1);
    expect(text.err).toContain('bad-catalog.yaml: invalid catalog: 1 problem\n  models[0].profiles[0].gpuClass:');
    expect(text.err).toContain('bad-inventory.json: invalid inventory: 2 problems\n  nodes[0].gpus.count: required\n  nodes[0].gpus.memoryTotal: required');

    const json = await run('plan', '--catalog', badCatalog, '--inventory', badInventory, '--json');
    expect(json.code).toBe(1);
    const body = JSON.parse(json.out) as { valid: boolean; problems: { file: string; path: string }[] };
    expect(body.valid).toBe(false);
    expect(body.problems.map((p) => `${p.file} ${p.path}`)).toEqual([
      'bad-catalog.yaml models[0].profiles[0].gpuClass',
      'bad-inventory.json nodes[0].gpus.count',
      'bad-inventory.json nodes[0].gpus.memoryTotal',
    ]);
  });

  it.each([
    ['not JSON', '{"nodes": [', /invalid inventory: not JSON/],
    ['a list', '[]', /\(document\): must be an object \(got an array\)/],
    ['null', 'null', /\(document\): must be an object \(got null\)/],
    ['nodes not a list', '{"nodes": "x"}', /nodes: must be a list \(got "x"\)/],
    ['no nodes', '{}', /nodes: required: a list of nodes/],
    ['a node not an object', '{"nodes": [7]}', /nodes\[0\]: must be an object \(got 7\)/],
  ])('never crashes on an inventory that is %s', async (_name, text, message) => {
    const r = await run('plan', '--catalog', CATALOG, '--inventory', file('odd.json', text));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(message);
  });

  it('reports a missing file, exit 1', async () => {
    const r = await run('plan', '--catalog', CATALOG, '--inventory', 'nope.json');
    expect(r.code).toBe(1);
    expect(r.err).toBe('nope.json: cannot read file\n  cannot read nope.json: no such file\n');
  });

  it.each([
    [['plan', '--inventory', 'x.json'], /missing --catalog FILE/],
    [['plan', '--catalog', 'x.yaml'], /missing --inventory FILE/],
    [['plan', '--catalog', 'x.yaml', '--inventory', 'y.json', '--bogus'], /Unknown option '--bogus'/],
  ])('usage errors exit 2: %j', async (argv, message) => {
    const r = await run(...argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).toContain('usage: llmgw plan --catalog FILE --inventory FILE [--json]');
  });

  it('counts existing allocations: held GPUs are not offered again', async () => {
    const inv = file(
      'held.json',
      JSON.stringify({
        nodes: [{ id: 'n', memory: '1TB', cache: { free: '1TB' }, gpus: { count: 2, name: 'H100-80GB', memoryTotal: '80GB' } }],
        allocations: [{ replicaId: 'r0', model: 'other', nodeId: 'n', gpuIndices: [0] }],
      }),
    );
    const cat = file(
      'two.yaml',
      'models:\n  - name: m\n    source: hf://o/m@main\n    size: 1GB\n    replicas: 2\n    profiles: [{engine: vllm, gpuClass: H100-80GB}]\n',
    );
    const r = await run('plan', '--catalog', cat, '--inventory', inv, '--json');
    const plan = JSON.parse(r.out) as Plan;
    expect(plan.replicas.map((x) => (x.ok ? x.members[0].gpuIndices : x.reasons.map((y) => y.reason)))).toEqual([
      [1],
      ['needs 1 free GPU, has 0'],
    ]);
    expect(r.code).toBe(1);
  });
});

describe('parseInventory', () => {
  it('fills friendly defaults', () => {
    const { inventory, problems } = parseInventory({
      nodes: [{ id: 'n', memory: '512GB', cache: { free: 0 }, gpus: [{ name: 'NVIDIA L4', memoryTotal: '24GB' }] }],
    });
    expect(problems).toEqual([]);
    expect(inventory).toEqual({
      nodes: [
        {
          id: 'n',
          address: 'n',
          labels: {},
          gpus: [{ index: 0, uuid: 'n-gpu0', name: 'NVIDIA L4', gpuClass: 'NVIDIA L4', memoryTotalBytes: 24e9, healthy: true }],
          cpuCores: 0,
          memoryBytes: 512e9,
          cache: { dir: '', totalBytes: 0, freeBytes: 0, entries: [] },
          state: 'healthy',
          cordoned: false,
        },
      ],
      allocations: [],
    });
  });

  it('reads the domain field names too (a NodeInfo dump), and the GPU shorthand', () => {
    const { inventory, problems } = parseInventory({
      nodes: [
        {
          id: 'd',
          address: '10.0.0.1',
          labels: { rack: 'r1' },
          fabric: 'ib',
          state: 'lost',
          cordoned: true,
          cpuCores: 8,
          memoryBytes: 1000,
          cache: { dir: '/c', totalBytes: 10, freeBytes: 5, entries: [{ name: 'llmgw-x', sizeBytes: 3, modifiedAt: 9 }] },
          gpus: [{ index: 3, uuid: 'GPU-1', name: 'NVIDIA H100', gpuClass: 'H100', memoryTotalBytes: 80, memoryUsedBytes: 0, utilizationPct: 5, healthy: false }],
        },
        { id: 's', memory: 1, cache: { free: 1 }, gpus: { count: 3, gpuClass: 'A100', memoryTotal: '80GB', memoryUsed: '1GB', unhealthy: [2] } },
      ],
      allocations: [{ replicaId: 'r', model: 'm', nodeId: 's', gpuIndices: [1], memory: '2GB' }],
    });
    expect(problems).toEqual([]);
    expect(inventory?.nodes[0]).toMatchObject({ id: 'd', fabric: 'ib', state: 'lost', cordoned: true, memoryBytes: 1000, labels: { rack: 'r1' } });
    expect(inventory?.nodes[0].gpus[0]).toEqual({
      index: 3,
      uuid: 'GPU-1',
      name: 'NVIDIA H100',
      gpuClass: 'H100',
      memoryTotalBytes: 80,
      memoryUsedBytes: 0,
      utilizationPct: 5,
      healthy: false,
    });
    expect(inventory?.nodes[1].gpus.map((g) => [g.index, g.uuid, g.name, g.gpuClass, g.memoryUsedBytes, g.healthy])).toEqual([
      [0, 's-gpu0', 'A100', 'A100', 1e9, true],
      [1, 's-gpu1', 'A100', 'A100', 1e9, true],
      [2, 's-gpu2', 'A100', 'A100', 1e9, false],
    ]);
    expect(inventory?.allocations).toEqual([{ replicaId: 'r', model: 'm', nodeId: 's', gpuIndices: [1], memoryBytes: 2e9 }]);
  });

  it.each<[string, unknown, string[]]>([
    [
      'both spellings of a size',
      { nodes: [{ id: 'n', memory: '1GB', memoryBytes: 1, cache: { free: 1 } }] },
      ['nodes[0].memory: give memory or memoryBytes, not both'],
    ],
    ['free larger than total', { nodes: [{ id: 'n', memory: 1, cache: { free: 2, total: 1 } }] }, ['nodes[0].cache.free: is larger than total']],
    ['a GPU without name or class', { nodes: [{ id: 'n', memory: 1, cache: { free: 1 }, gpus: [{ memoryTotal: 1 }] }] }, ['nodes[0].gpus[0].name: required (or gpuClass)']],
    [
      'an unhealthy index past the count',
      { nodes: [{ id: 'n', memory: 1, cache: { free: 1 }, gpus: { count: 2, name: 'X', memoryTotal: 1, unhealthy: [2] } }] },
      ['nodes[0].gpus.unhealthy[0]: no GPU 2 (count is 2)'],
    ],
    [
      'an allocation on a missing GPU, and a GPU held twice',
      {
        nodes: [{ id: 'n', memory: 1, cache: { free: 1 }, gpus: { count: 2, name: 'X', memoryTotal: 1 } }],
        allocations: [
          { replicaId: 'a', model: 'm', nodeId: 'n', gpuIndices: [0, 5] },
          { replicaId: 'b', model: 'm', nodeId: 'n', gpuIndices: [0] },
        ],
      },
      ['allocations[0].gpuIndices[1]: node "n" has no GPU 5', 'allocations[1].gpuIndices[0]: GPU 0 of "n" is already held by replica "a"'],
    ],
    [
      'labels and allocation fields of the wrong type',
      { nodes: [{ id: 'n', memory: 1, cache: { free: 1 }, labels: { a: 1 } }], allocations: [{ model: 'm', nodeId: 'n', gpuIndices: 'x' }] },
      ['nodes[0].labels.a: must be a string (got 1)', 'allocations[0].replicaId: required', 'allocations[0].gpuIndices: must be a list of GPU indices (got "x")'],
    ],
  ])('refuses %s', (_name, doc, expected) => {
    const r = parseInventory(doc);
    expect(r.inventory).toBeUndefined();
    expect(r.problems.map((p) => `${p.path}: ${p.message}`)).toEqual(expected);
  });
});
