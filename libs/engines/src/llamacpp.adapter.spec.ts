import { Catalog } from '@llmgw/catalog';
import type { Model } from '@llmgw/domain';
import { defaultMapping } from '@llmgw/metrics-mappings';
import { describe, expect, it } from 'vitest';
import type { LaunchSpec } from './engine.adapter';
import { LLAMACPP_ALL_LAYERS, LlamaCppAdapter } from './llamacpp.adapter';

function model(profile: Record<string, unknown>, extra: Record<string, unknown> = {}): Model {
  return Catalog.create({
    models: [{ name: 'qwen-0.5b', aliases: ['qwen'], source: 'https://h/qwen.gguf', size: '491MB', replicas: 1, profiles: [profile], ...extra }],
  }).models[0];
}

function spec(m: Model, over: Partial<LaunchSpec> = {}): LaunchSpec {
  return {
    model: m,
    profile: m.profiles[0],
    replicaId: 'r-2',
    weightsPath: '/cache/llmgw-0123456789abcdef-qwen.gguf',
    host: '127.0.0.1',
    port: 9100,
    gpuIndices: [],
    rank: 0,
    ...over,
  };
}

const adapter = new LlamaCppAdapter();
const head = ['-m', '/cache/llmgw-0123456789abcdef-qwen.gguf', '--host', '127.0.0.1', '--port', '9100', '--metrics', '--alias', 'qwen-0.5b'];

describe('LlamaCppAdapter.launch', () => {
  it.each([
    ['CPU, engine defaults', model({ engine: 'llamacpp' }), [], [...head, '-ngl', '0'], { CUDA_VISIBLE_DEVICES: '' }],
    [
      'CPU with context, parallel, env and args',
      model({ engine: 'llamacpp', contextLength: 4096, parallel: 4, args: ['--threads', '1'], env: { LLAMA_ARG_BATCH: '512' } }),
      [],
      [...head, '-c', '4096', '-np', '4', '-ngl', '0', '--threads', '1'],
      { LLAMA_ARG_BATCH: '512', CUDA_VISIBLE_DEVICES: '' },
    ],
    [
      'one GPU: every layer offloaded',
      model({ engine: 'llamacpp', gpuClass: 'L4', contextLength: 8192 }),
      [2],
      [...head, '-c', '8192', '-ngl', String(LLAMACPP_ALL_LAYERS)],
      { CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: '2' },
    ],
    [
      'GPU with a partial offload in args (last wins)',
      model({ engine: 'llamacpp', gpuClass: 'L4', args: ['-ngl', '20'] }),
      [0],
      [...head, '-ngl', '999', '-ngl', '20'],
      { CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: '0' },
    ],
  ] as const)('%s', (_n, m, gpuIndices, args, env) => {
    const plan = adapter.launch(spec(m, { gpuIndices }));
    expect(plan).toEqual({
      role: 'server',
      command: 'llama-server',
      args,
      env,
      setup: [],
      teardown: [],
      port: 9100,
      healthPath: '/health',
      readiness: 'http-503-until-ready',
      metrics: defaultMapping('llamacpp'),
    });
  });

  it('takes the binary from options, and from the spec over options', () => {
    const custom = new LlamaCppAdapter({ binary: '/opt/llama.cpp/build/bin/llama-server' });
    expect(custom.launch(spec(model({ engine: 'llamacpp' }))).command).toBe('/opt/llama.cpp/build/bin/llama-server');
    expect(custom.launch(spec(model({ engine: 'llamacpp' }), { binary: './llama-server' })).command).toBe('./llama-server');
  });

  it('uses a complete metric override as written', () => {
    const m = model({ engine: 'llamacpp' }, { metrics: { running: 'llamacpp:requests_processing' } });
    const plan = adapter.launch(spec(m));
    if (plan.role !== 'server') throw new Error('expected a server');
    expect(plan.metrics).toEqual({ running: 'llamacpp:requests_processing' });
  });

  it('refuses multi-node and tensor-parallel profiles built by hand', () => {
    const p = model({ engine: 'llamacpp', gpuClass: 'L4' }).profiles[0];
    const m = model({ engine: 'llamacpp', gpuClass: 'L4' });
    expect(() =>
      adapter.launch(spec(m, { profile: { ...p, nodes: 2 }, gpuIndices: [0], members: { leaderAddress: 'a', leaderPort: 1 } })),
    ).toThrow('profile.nodes: engine llamacpp runs a replica on one node (got 2)');
    expect(() => adapter.launch(spec(m, { profile: { ...p, gpusPerNode: 2, tensorParallel: 2 }, gpuIndices: [0, 1] }))).toThrow(
      'profile.tensorParallel: engine llamacpp does not support tensor parallelism (got 2)',
    );
  });

  it('refuses GPUs for a CPU profile', () => {
    expect(() => adapter.launch(spec(model({ engine: 'llamacpp' }), { gpuIndices: [0] }))).toThrow(
      'gpuIndices: has 1 GPU(s), the profile wants 0 per node',
    );
  });
});
