import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ErrorCode, type Problem } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { cacheName } from './cache-name';
import { Catalog, diffCatalogs } from './catalog';
import { modelEndpoints } from './engine-capabilities';
import { CatalogError } from './catalog.error';
import { loadCatalog } from './catalog-document.parser';

type Doc = { models: Record<string, unknown>[] } & Record<string, unknown>;

/** A small valid catalog: one vLLM GPU model, one llama.cpp CPU model. Fresh per call. */
function base(): Doc {
  return {
    models: [
      {
        name: 'llama-8b',
        aliases: ['llama'],
        source: 'hf://meta-llama/Llama-3.1-8B-Instruct@main',
        size: '16GB',
        replicas: 2,
        profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }],
      },
      {
        name: 'qwen-0.5b',
        source: 'https://example.com/models/qwen-0.5b.Q4_K_M.gguf',
        size: 491_000_000,
        replicas: { min: 1, max: 3 },
        profiles: [{ engine: 'llamacpp' }],
      },
    ],
  };
}

function problemsOf(doc: unknown): Problem[] {
  try {
    Catalog.create(doc);
  } catch (e) {
    expect(e).toBeInstanceOf(CatalogError);
    return [...(e as CatalogError).problems];
  }
  throw new Error('expected Catalog.create to refuse the document');
}

type Edit = (d: Doc) => unknown;
const m0 = (d: Doc) => d.models[0];
const m1 = (d: Doc) => d.models[1];
const p0 = (d: Doc, i = 0) => (d.models[i].profiles as Record<string, unknown>[])[0];

// Each case breaks exactly one thing and must yield exactly one problem at exactly this path.
const INVALID: [string, Edit, string, string][] = [
  ['vLLM profile without gpuClass', (d) => delete p0(d, 0).gpuClass, 'models[0].profiles[0].gpuClass', 'required for engine vllm'],
  [
    'vLLM without gpuClass in the second model',
    (d) => (d.models[1].profiles = [{ engine: 'vllm' }]),
    'models[1].profiles[0].gpuClass',
    'required for engine vllm',
  ],
  ['duplicate model name', (d) => (m1(d).name = 'llama-8b'), 'models[1].name', '"llama-8b" is already the name of models[0]'],
  ['alias equal to another model name', (d) => (m1(d).aliases = ['llama-8b']), 'models[1].aliases[0]', '"llama-8b" is the name of models[0]'],
  ['alias equal to another alias', (d) => (m1(d).aliases = ['x', 'llama']), 'models[1].aliases[1]', '"llama" is already an alias of models[0]'],
  ['alias equal to its own name', (d) => (m0(d).aliases = ['llama-8b']), 'models[0].aliases[0]', "this model's own name"],
  ['name with a space', (d) => (m0(d).name = 'llama 8b'), 'models[0].name', 'is not a valid name'],
  ['llama.cpp on two nodes', (d) => (p0(d, 1).nodes = 2), 'models[1].profiles[0].nodes', 'engine llamacpp runs a replica on one node (got 2)'],
  [
    'llama.cpp with tensor parallel',
    (d) => (p0(d, 1).tensorParallel = 2),
    'models[1].profiles[0].tensorParallel',
    'engine llamacpp does not support tensor parallelism',
  ],
  [
    'vLLM GPUs not matching parallelism',
    (d) => (p0(d, 0).tensorParallel = 2),
    'models[0].profiles[0]',
    'gpusPerNode × nodes (1 × 1 = 1) must equal tensorParallel × pipelineParallel (2 × 1 = 2) for engine vllm',
  ],
  ['zero size', (d) => (m0(d).size = 0), 'models[0].size', 'must be a positive whole number of bytes'],
  ['size with an unknown unit', (d) => (m0(d).size = '16 gigs'), 'models[0].size', 'is not a size'],
  ['unsupported source scheme', (d) => (m0(d).source = 's3://bucket/model'), 'models[0].source', 'is not a supported source'],
  ['hf source without a revision', (d) => (m0(d).source = 'hf://meta-llama/Llama-3.1-8B-Instruct'), 'models[0].source', 'must be hf://org/repo[/file]@revision'],
  ['relative file source', (d) => (m0(d).source = 'file://models/x.gguf'), 'models[0].source', 'absolute path'],
  ['replicas min above max', (d) => (m1(d).replicas = { min: 3, max: 1 }), 'models[1].replicas.min', 'must not exceed max (3 > 1)'],
  ['negative replicas', (d) => (m0(d).replicas = -1), 'models[0].replicas', 'must be a whole number ≥ 0'],
  ['a billion replicas', (d) => (m0(d).replicas = 1e9), 'models[0].replicas', 'must be at most 1000 replicas (got 1000000000)'],
  ['replicas.max above the bound', (d) => (m1(d).replicas = { min: 1, max: 1001 }), 'models[1].replicas.max', 'must be at most 1000 replicas (got 1001)'],
  ['args as a shell string', (d) => (p0(d, 0).args = '--enforce-eager --seed 1'), 'models[0].profiles[0].args', 'must be a list of strings'],
  ['a number in args', (d) => (p0(d, 0).args = ['--seed', 1]), 'models[0].profiles[0].args[1]', 'must be a string'],
  ['lower-case env key', (d) => (p0(d, 0).env = { hf_home: '/x' }), 'models[0].profiles[0].env.hf_home', '[A-Z_][A-Z0-9_]*'],
  ['env value not a string', (d) => (p0(d, 0).env = { NCCL_DEBUG: 1 }), 'models[0].profiles[0].env.NCCL_DEBUG', 'must be a string'],
  ['env setting CUDA_VISIBLE_DEVICES', (d) => (p0(d, 0).env = { CUDA_VISIBLE_DEVICES: '0' }), 'models[0].profiles[0].env.CUDA_VISIBLE_DEVICES', 'is set by llmgw'],
  ['no profiles', (d) => (m0(d).profiles = []), 'models[0].profiles', 'at least one profile is required'],
  ['typo in a profile key', (d) => (p0(d, 0).gpuClas = 'H100'), 'models[0].profiles[0].gpuClas', 'unknown field (did you mean gpuClass?)'],
  ['unknown model key', (d) => (m0(d).replica = 2), 'models[0].replica', 'unknown field (did you mean replicas?)'],
  ['CPU profile asking for GPUs', (d) => (p0(d, 1).gpusPerNode = 2), 'models[1].profiles[0].gpusPerNode', 'must be 0 without a gpuClass'],
  ['GPU profile with zero GPUs', (d) => (p0(d, 0).gpusPerNode = 0), 'models[0].profiles[0].gpusPerNode', 'must be at least 1'],
  ['unknown engine', (d) => (p0(d, 0).engine = 'tgi'), 'models[0].profiles[0].engine', 'must be one of vllm, llamacpp'],
  ['flag llmgw sets itself', (d) => (p0(d, 0).args = ['--port=9000']), 'models[0].profiles[0].args[0]', '--port is set by llmgw'],
  [
    'llama.cpp on a whole repository',
    (d) => (m1(d).source = 'hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF@main'),
    'models[1].profiles[0].engine',
    'llamacpp loads one weights file',
  ],
  ['malformed sha256', (d) => (m0(d).sha256 = 'abc'), 'models[0].sha256', 'must be 64 hex digits'],
  ['metric override not a metric name', (d) => (m0(d).metrics = { running: 'num running' }), 'models[0].metrics.running', 'Prometheus metric name'],
  ['first-byte timeout without a unit', (d) => (m0(d).firstByteTimeout = 30), 'models[0].firstByteTimeout', 'must be a duration such as "500ms"'],
  ['stall timeout too short', (d) => (m0(d).stallTimeout = '10ms'), 'models[0].stallTimeout', 'must be between 100ms and 1h'],
  ['unknown routing policy', (d) => (m0(d).routing = { policy: 'random' }), 'models[0].routing.policy', 'must be one of least-load, prefix-affinity, round-robin'],
  ['routing epsilon 0', (d) => (m0(d).routing = { policy: 'prefix-affinity', prefixAffinity: { epsilon: 0 } }), 'models[0].routing.prefixAffinity.epsilon', 'must be a number above 0'],
  ['fractional bytes', (d) => (p0(d, 0).memoryPerGpu = '1.5B'), 'models[0].profiles[0].memoryPerGpu', 'not a whole number of bytes'],
  ['zero context length', (d) => (p0(d, 0).contextLength = 0), 'models[0].profiles[0].contextLength', 'must be a whole number ≥ 1'],
  ['endpoints not a list', (d) => (m0(d).endpoints = 'chat'), 'models[0].endpoints', 'must be a non-empty list of chat, completions, embeddings'],
  ['empty endpoints', (d) => (p0(d, 0).endpoints = []), 'models[0].profiles[0].endpoints', 'must be a non-empty list'],
  ['unknown endpoint', (d) => (m0(d).endpoints = ['chat', 'images']), 'models[0].endpoints[1]', 'must be one of chat, completions, embeddings (got "images")'],
  ['endpoint listed twice', (d) => (p0(d, 1).endpoints = ['chat', 'chat']), 'models[1].profiles[0].endpoints[1]', 'chat is listed twice'],
  [
    'profiles serving nothing in common',
    (d) => (m1(d).profiles = [{ engine: 'llamacpp' }, { engine: 'llamacpp', args: ['--embeddings'] }]),
    'models[1].profiles',
    'the profiles serve no API endpoint in common',
  ],
  ['vLLM pooling model that embeds nothing', (d) => (p0(d, 0).args = ['--task', 'classify']), 'models[0].profiles', 'serve no API endpoint in common'],
  ['models not a list', (d) => (d.models = { a: 1 } as never), 'models', 'must be a list'],
  ['unknown top-level key', (d) => (d.model = []), 'model', 'unknown field (did you mean models?)'],
];

describe('Catalog.create refuses invalid catalogs', () => {
  it.each(INVALID.map(([name, edit, path, message]) => ({ name, edit, path, message })))('$name → $path', ({ edit, path, message }) => {
    const doc = base();
    edit(doc);
    const problems = problemsOf(doc);
    expect(problems).toHaveLength(1);
    expect(problems[0].path).toBe(path);
    expect(problems[0].message).toContain(message);
  });

  it('throws a CatalogError with code invalid_argument and every problem in the message', () => {
    const doc = base();
    delete p0(doc, 0).gpuClass;
    try {
      Catalog.create(doc);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(CatalogError);
      const err = e as CatalogError;
      expect(err.code).toBe(ErrorCode.InvalidArgument);
      expect(err.message).toBe('invalid catalog: 1 problem\nmodels[0].profiles[0].gpuClass: required for engine vllm');
    }
  });

  it('lists every problem of a catalog with several, in document order', () => {
    const doc = {
      models: [
        { name: 'a', source: 'ftp://x/y', size: '1XB', replicas: { min: 2, max: 1 }, profiles: [{ engine: 'vllm', tensorParallel: 2 }] },
        {
          name: 'a',
          aliases: ['a'],
          source: 'https://h/w.gguf',
          size: 1,
          replicas: 1,
          profiles: [{ engine: 'llamacpp', nodes: 3, env: { 'bad key': 'v' } }],
        },
      ],
    };
    expect(problemsOf(doc)).toEqual([
      { path: 'models[0].source', message: expect.stringContaining('is not a supported source') },
      { path: 'models[0].size', message: expect.stringContaining('"1XB" is not a size') },
      { path: 'models[0].replicas.min', message: 'must not exceed max (2 > 1)' },
      { path: 'models[0].profiles[0].gpuClass', message: 'required for engine vllm' },
      { path: 'models[1].profiles[0].env["bad key"]', message: 'variable names match [A-Z_][A-Z0-9_]*' },
      { path: 'models[1].profiles[0].nodes', message: 'engine llamacpp runs a replica on one node (got 3)' },
      { path: 'models[1].name', message: '"a" is already the name of models[0]' },
      { path: 'models[1].aliases[0]', message: '"a" is the name of models[0]' },
    ]);
  });

  it.each([
    ['null', null],
    ['a list', []],
    ['a string', 'models: []'],
  ])('refuses a document that is %s', (_n, doc) => {
    expect(problemsOf(doc)).toEqual([{ path: '', message: expect.stringContaining('a catalog is a mapping with a "models" list') }]);
  });

  it('requires models', () => {
    expect(problemsOf({})).toEqual([{ path: 'models', message: 'required (a list of models, possibly empty)' }]);
  });
});

describe('Catalog.create accepts valid catalogs', () => {
  it('normalises sizes and fills defaults', () => {
    const c = Catalog.create(base());
    const [llama, qwen] = c.models;
    expect(llama).toEqual({
      name: 'llama-8b',
      aliases: ['llama'],
      source: 'hf://meta-llama/Llama-3.1-8B-Instruct@main',
      sizeBytes: 16_000_000_000,
      replicas: { min: 2, max: 2 },
      profiles: [
        {
          engine: 'vllm',
          gpuClass: 'H100-80GB',
          gpusPerNode: 1,
          nodes: 1,
          tensorParallel: 1,
          pipelineParallel: 1,
          memoryPerGpuBytes: 0,
          memoryBytes: 0,
          args: [],
          env: {},
        },
      ],
    });
    expect(qwen.profiles[0]).toMatchObject({ engine: 'llamacpp', gpusPerNode: 0, nodes: 1 });
    expect(qwen.profiles[0].gpuClass).toBeUndefined();
    expect('gpuClass' in qwen.profiles[0]).toBe(false);
    expect(qwen.replicas).toEqual({ min: 1, max: 3 });
  });

  it('accepts multi-node vLLM when GPUs match the parallel layout', () => {
    const doc = base();
    Object.assign(p0(doc, 0), { gpusPerNode: 8, nodes: 2, tensorParallel: 8, pipelineParallel: 2, memoryPerGpu: '70GiB' });
    const p = Catalog.create(doc).models[0].profiles[0];
    expect(p).toMatchObject({ gpusPerNode: 8, nodes: 2, tensorParallel: 8, pipelineParallel: 2, memoryPerGpuBytes: 70 * 2 ** 30 });
  });

  it('accepts an empty catalog', () => {
    expect(Catalog.create({ models: [] }).models).toEqual([]);
  });

  it('reads the same catalog from YAML and JSON', () => {
    const yaml = `
models:
  - name: llama-8b
    aliases: [llama]
    source: hf://meta-llama/Llama-3.1-8B-Instruct@main
    size: 16GB
    replicas: 2
    profiles:
      - engine: vllm
        gpuClass: H100-80GB
  - name: qwen-0.5b
    source: https://example.com/models/qwen-0.5b.Q4_K_M.gguf
    size: 491000000
    replicas: {min: 1, max: 3}
    profiles: [{engine: llamacpp}]
`;
    const fromYaml = loadCatalog(yaml);
    const fromJson = loadCatalog(JSON.stringify(base()), 'json');
    expect(fromYaml.toSpec()).toEqual(fromJson.toSpec());
    expect(fromYaml.models).toEqual(Catalog.create(base()).models);
  });

  it('loads the commented sample in deploy/', () => {
    const text = readFileSync(resolve(__dirname, '../../../deploy/catalog.sample.yaml'), 'utf8');
    const c = loadCatalog(text);
    expect(c.models.map((m) => m.name)).toEqual([
      'llama-3.1-8b-instruct',
      'llama-3.1-405b-instruct',
      'qwen2.5-0.5b-instruct',
      'mistral-7b-instruct-q4',
    ]);
    expect(c.get('llama3-405b')?.profiles[0]).toMatchObject({ nodes: 2, gpusPerNode: 8, tensorParallel: 8, pipelineParallel: 2 });
    expect(c.get('qwen-small')?.profiles[0].gpuClass).toBeUndefined();
  });

  it('round-trips through toSpec as plain JSON', () => {
    const doc = base();
    Object.assign(p0(doc, 0), { memoryPerGpu: '40GiB', contextLength: 8192, args: ['--seed', '1'], env: { B: '2', A: '1' }, endpoints: ['completions', 'chat'] });
    Object.assign(m0(doc), { sha256: 'AB'.repeat(32), metrics: { running: 'x:running', kvUsage: ['x:kv'] }, endpoints: ['chat'], firstByteTimeout: '30s', stallTimeout: '1m' });
    Object.assign(m0(doc), { routing: { policy: 'prefix-affinity', prefixAffinity: { maxBlocks: 8, epsilon: 0.5 } } });
    m1(doc).routing = { policy: 'round-robin' };
    m0(doc).source = 'https://h/llama.safetensors';
    const c = Catalog.create(doc);
    const spec = JSON.parse(JSON.stringify(c.toSpec()));
    const again = Catalog.create(spec);
    expect(again.models).toEqual(c.models);
    expect(again.toSpec()).toEqual(spec);
    expect(c.models[0].sha256).toBe('ab'.repeat(32));
    expect(c.models[0]).toMatchObject({ firstByteTimeoutMs: 30_000, stallTimeoutMs: 60_000, routing: { policy: 'prefix-affinity', prefixAffinity: { maxBlocks: 8, epsilon: 0.5 } } });
    expect(c.models[1].routing).toEqual({ policy: 'round-robin' });
    expect(c.models[1].firstByteTimeoutMs).toBeUndefined();
  });
});

describe('the API endpoints a model serves', () => {
  const served = (model: Record<string, unknown>) => {
    const doc = base();
    doc.models = [{ ...doc.models[1], ...model }];
    return modelEndpoints(Catalog.create(doc).models[0]);
  };
  const llamacpp = (extra: Record<string, unknown> = {}) => ({ profiles: [{ engine: 'llamacpp', ...extra }] });
  const vllm = (args: string[]) => ({ source: 'hf://org/m@main', profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', args }] });

  it.each<[string, Record<string, unknown>, string[]]>([
    ['llama.cpp by default', llamacpp(), ['chat', 'completions']],
    ['llama.cpp with --embeddings', llamacpp({ args: ['--embeddings'] }), ['embeddings']],
    ['llama.cpp with --embedding', llamacpp({ args: ['--threads', '2', '--embedding'] }), ['embeddings']],
    ['llama.cpp with LLAMA_ARG_EMBEDDINGS=true', llamacpp({ env: { LLAMA_ARG_EMBEDDINGS: 'true' } }), ['embeddings']],
    ['llama.cpp with LLAMA_ARG_EMBEDDINGS=0', llamacpp({ env: { LLAMA_ARG_EMBEDDINGS: '0' } }), ['chat', 'completions']],
    ['vLLM by default', vllm([]), ['chat', 'completions']],
    ['vLLM --task generate', vllm(['--task', 'generate']), ['chat', 'completions']],
    ['vLLM --task embed', vllm(['--task', 'embed']), ['embeddings']],
    ['vLLM --task=embedding', vllm(['--task=embedding']), ['embeddings']],
    ['vLLM --runner pooling', vllm(['--runner', 'pooling']), ['embeddings']],
    ['vLLM --convert embed', vllm(['--convert=embed']), ['embeddings']],
    ['vLLM: the last --task wins', vllm(['--task', 'embed', '--task', 'generate']), ['chat', 'completions']],
    ['a profile stating its own', llamacpp({ endpoints: ['embeddings', 'chat'] }), ['chat', 'embeddings']],
    ['the model stating its own over its profiles', { endpoints: ['completions'], ...llamacpp({ args: ['--embeddings'] }) }, ['completions']],
    ['two profiles: what both serve', { profiles: [{ engine: 'llamacpp', gpuClass: 'L4' }, { engine: 'llamacpp', endpoints: ['chat'] }] }, ['chat']],
  ])('%s', (_name, model, expected) => {
    expect(served(model)).toEqual(expected);
  });
});

describe('Catalog objects', () => {
  it('are deeply frozen', () => {
    const c = Catalog.create(base());
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.models)).toBe(true);
    const m = c.models[0];
    for (const v of [m, m.aliases, m.replicas, m.profiles, m.profiles[0], m.profiles[0].args, m.profiles[0].env]) {
      expect(Object.isFrozen(v)).toBe(true);
    }
    expect(() => ((m as { name: string }).name = 'x')).toThrow(TypeError);
    expect(() => (c.models as unknown as unknown[]).push(m)).toThrow(TypeError);
    expect(() => (m.profiles[0].args as string[]).push('--x')).toThrow(TypeError);
  });

  it('are not changed by later edits to the document they came from', () => {
    const doc = base();
    const c = Catalog.create(doc);
    m0(doc).name = 'changed';
    (m0(doc).aliases as string[]).push('more');
    expect(c.models[0].name).toBe('llama-8b');
    expect(c.models[0].aliases).toEqual(['llama']);
  });

  it('resolves names and aliases, case-sensitively, and nothing else', () => {
    const c = Catalog.create(base());
    expect(c.get('llama-8b')?.name).toBe('llama-8b');
    expect(c.get('llama')).toBe(c.get('llama-8b'));
    expect(c.has('qwen-0.5b')).toBe(true);
    expect(c.get('LLAMA')).toBeUndefined();
    expect(c.has('unknown')).toBe(false);
    expect(c.get('toString')).toBeUndefined();
    expect(c.get('__proto__')).toBeUndefined();
  });

  it('wants exactly the cache names of its non-file sources', () => {
    const doc = base();
    doc.models.push({
      name: 'local',
      source: 'file:///srv/models/local.gguf',
      size: 10,
      replicas: 0,
      profiles: [{ engine: 'llamacpp' }],
    });
    const c = Catalog.create(doc);
    const wanted = c.wantedCacheNames();
    expect([...wanted].sort()).toEqual(
      [cacheName('hf://meta-llama/Llama-3.1-8B-Instruct@main'), cacheName('https://example.com/models/qwen-0.5b.Q4_K_M.gguf')].sort(),
    );
    (wanted as Set<string>).add('llmgw-0000000000000000-x');
    expect(c.wantedCacheNames().size).toBe(2);
  });
});

describe('diffCatalogs', () => {
  it('reports added, removed and changed models by name, sorted', () => {
    const old = Catalog.create(base());
    const doc = base();
    doc.models.splice(1, 1);
    m0(doc).replicas = 3;
    doc.models.push({ name: 'b-new', source: 'https://h/b.gguf', size: 1, replicas: 1, profiles: [{ engine: 'llamacpp' }] });
    doc.models.push({ name: 'a-new', source: 'https://h/a.gguf', size: 1, replicas: 1, profiles: [{ engine: 'llamacpp' }] });
    expect(diffCatalogs(old, Catalog.create(doc))).toEqual({ added: ['a-new', 'b-new'], removed: ['qwen-0.5b'], changed: ['llama-8b'] });
  });

  it('sees no change between equal documents, whatever the key order or size spelling', () => {
    const doc = base();
    m0(doc).size = 16_000_000_000;
    p0(doc, 0).env = { A: '1', B: '2' };
    const other = base();
    p0(other, 0).env = { B: '2', A: '1' };
    expect(diffCatalogs(Catalog.create(doc), Catalog.create(other))).toEqual({ added: [], removed: [], changed: [] });
  });

  it('counts an alias change as a change and treats no old catalog as empty', () => {
    const doc = base();
    m0(doc).aliases = ['llama', 'l8'];
    expect(diffCatalogs(Catalog.create(base()), Catalog.create(doc)).changed).toEqual(['llama-8b']);
    expect(diffCatalogs(undefined, Catalog.create(base()))).toEqual({ added: ['llama-8b', 'qwen-0.5b'], removed: [], changed: [] });
  });
});
