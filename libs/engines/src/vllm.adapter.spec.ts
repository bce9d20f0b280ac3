import { Catalog } from '@llmgw/catalog';
import { DomainError, type Model } from '@llmgw/domain';
import { defaultMapping } from '@llmgw/metrics-mappings';
import { describe, expect, it } from 'vitest';
import type { LaunchSpec } from './engine.adapter';
import { VllmAdapter } from './vllm.adapter';

function model(profile: Record<string, unknown>, extra: Record<string, unknown> = {}): Model {
  return Catalog.create({
    models: [{ name: 'llama-70b', aliases: ['llama', 'l70'], source: 'hf://meta/llama@main', size: '140GB', replicas: 1, profiles: [profile], ...extra }],
  }).models[0];
}

function spec(m: Model, over: Partial<LaunchSpec> = {}): LaunchSpec {
  return {
    model: m,
    profile: m.profiles[0],
    replicaId: 'r-1',
    weightsPath: '/var/cache/llmgw/llmgw-0123456789abcdef-llama',
    host: '0.0.0.0',
    port: 8001,
    gpuIndices: [0],
    rank: 0,
    ...over,
  };
}

const adapter = new VllmAdapter();

describe('VllmAdapter.launch', () => {
  it.each([
    [
      'one GPU',
      model({ engine: 'vllm', gpuClass: 'H100' }),
      { gpuIndices: [3] },
      ['serve', '/var/cache/llmgw/llmgw-0123456789abcdef-llama', '--host', '0.0.0.0', '--port', '8001', '--served-model-name', 'llama-70b', 'llama', 'l70', '--tensor-parallel-size', '1', '--pipeline-parallel-size', '1'],
      '3',
    ],
    [
      'four GPUs, tensor parallel, context, max sequences and profile args last',
      model({ engine: 'vllm', gpuClass: 'H100', gpusPerNode: 4, tensorParallel: 4, contextLength: 32768, parallel: 64, args: ['--enable-prefix-caching', '--gpu-memory-utilization', '0.9'] }),
      { gpuIndices: [4, 5, 6, 7] },
      [
        'serve', '/var/cache/llmgw/llmgw-0123456789abcdef-llama', '--host', '0.0.0.0', '--port', '8001',
        '--served-model-name', 'llama-70b', 'llama', 'l70', '--tensor-parallel-size', '4', '--pipeline-parallel-size', '1',
        '--max-model-len', '32768', '--max-num-seqs', '64', '--enable-prefix-caching', '--gpu-memory-utilization', '0.9',
      ],
      '4,5,6,7',
    ],
  ] as const)('single node: %s', (_n, m, over, args, visible) => {
    const plan = adapter.launch(spec(m, over));
    expect(plan.role).toBe('server');
    expect(plan.command).toBe('vllm');
    expect(plan.args).toEqual(args);
    expect(plan.setup).toEqual([]);
    expect(plan.teardown).toEqual([]);
    expect(plan.env).toEqual({ CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: visible });
    if (plan.role !== 'server') throw new Error('expected a server');
    expect(plan).toMatchObject({ port: 8001, healthPath: '/health', readiness: 'refuses-until-ready' });
    expect(plan.metrics).toEqual(defaultMapping('vllm'));
  });

  const multi = model({ engine: 'vllm', gpuClass: 'H100', gpusPerNode: 8, nodes: 2, tensorParallel: 8, pipelineParallel: 2, env: { NCCL_SOCKET_IFNAME: 'ib0' } });
  const members = { leaderAddress: '10.0.0.5', leaderPort: 6380 };
  const eight = [0, 1, 2, 3, 4, 5, 6, 7];

  it('multi-node leader: starts a Ray head, then serves with the ray backend, and stops Ray on teardown', () => {
    const plan = adapter.launch(spec(multi, { gpuIndices: eight, members, rank: 0 }));
    expect(plan.role).toBe('server');
    expect(plan.setup).toEqual([{ command: 'ray', args: ['start', '--head', '--port=6380', '--num-gpus=8', '--disable-usage-stats'] }]);
    expect(plan.teardown).toEqual([{ command: 'ray', args: ['stop'] }]);
    expect(plan.command).toBe('vllm');
    expect(plan.args).toEqual([
      'serve', '/var/cache/llmgw/llmgw-0123456789abcdef-llama', '--host', '0.0.0.0', '--port', '8001',
      '--served-model-name', 'llama-70b', 'llama', 'l70', '--tensor-parallel-size', '8', '--pipeline-parallel-size', '2',
      '--distributed-executor-backend', 'ray',
    ]);
    expect(plan.env).toEqual({
      NCCL_SOCKET_IFNAME: 'ib0',
      CUDA_DEVICE_ORDER: 'PCI_BUS_ID',
      CUDA_VISIBLE_DEVICES: '0,1,2,3,4,5,6,7',
      RAY_ADDRESS: '10.0.0.5:6380',
    });
  });

  it('multi-node worker: joins the leader as a Ray worker, serves nothing, and stops Ray on teardown', () => {
    const plan = adapter.launch(spec(multi, { gpuIndices: eight, members, rank: 1 }));
    expect(plan).toEqual({
      role: 'worker',
      command: 'ray',
      args: ['start', '--address=10.0.0.5:6380', '--num-gpus=8', '--disable-usage-stats', '--block'],
      env: { NCCL_SOCKET_IFNAME: 'ib0', CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: '0,1,2,3,4,5,6,7' },
      setup: [],
      teardown: [{ command: 'ray', args: ['stop'] }],
    });
    expect('port' in plan).toBe(false);
  });

  it('brackets an IPv6 leader address', () => {
    const plan = adapter.launch(spec(multi, { gpuIndices: eight, members: { leaderAddress: 'fd00::5', leaderPort: 6380 }, rank: 1 }));
    expect(plan.args).toContain('--address=[fd00::5]:6380');
  });

  it('takes the binaries from options and from the spec', () => {
    const custom = new VllmAdapter({ binary: '/opt/vllm/bin/vllm', rayBinary: '/opt/vllm/bin/ray' });
    expect(custom.launch(spec(model({ engine: 'vllm', gpuClass: 'H100' }))).command).toBe('/opt/vllm/bin/vllm');
    expect(custom.launch(spec(multi, { gpuIndices: eight, members, rank: 1 })).command).toBe('/opt/vllm/bin/ray');
    expect(custom.launch(spec(multi, { gpuIndices: eight, members, rank: 0 })).teardown).toEqual([{ command: '/opt/vllm/bin/ray', args: ['stop'] }]);
    expect(adapter.launch(spec(model({ engine: 'vllm', gpuClass: 'H100' }), { binary: '/usr/local/bin/vllm' })).command).toBe('/usr/local/bin/vllm');
  });

  it("uses the model's metric override resolved against vLLM's default", () => {
    const m = model({ engine: 'vllm', gpuClass: 'H100' }, { metrics: { waiting: 'custom:waiting' } });
    const plan = adapter.launch(spec(m));
    if (plan.role !== 'server') throw new Error('expected a server');
    expect(plan.metrics).toEqual({ ...defaultMapping('vllm'), waiting: 'custom:waiting' });
  });

  it.each([
    ['too few GPUs', {}, 'gpuIndices', 'has 1 GPU(s), the profile wants 8 per node'],
    ['no members', { gpuIndices: eight }, 'members', 'required: the profile spans 2 nodes'],
    ['rank outside the replica', { gpuIndices: eight, members, rank: 2 }, 'rank', 'must be 0..1 (got 2)'],
    ['repeated GPU', { gpuIndices: [0, 0, 1, 2, 3, 4, 5, 6], members }, 'gpuIndices', 'must be distinct'],
    ['bad port', { gpuIndices: eight, members, port: 0 }, 'port', 'must be 1..65535 (got 0)'],
  ] as const)('refuses a spec with %s', (_n, over, path, message) => {
    try {
      adapter.launch(spec(multi, over as Partial<LaunchSpec>));
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(DomainError);
      expect((e as DomainError).problems).toContainEqual({ path, message: expect.stringContaining(message) });
    }
  });

  it('refuses a llama.cpp profile and a hand-built CPU profile', () => {
    const cpu = { ...model({ engine: 'vllm', gpuClass: 'H100' }).profiles[0], gpuClass: undefined, gpusPerNode: 0 };
    expect(() => adapter.launch(spec(model({ engine: 'vllm', gpuClass: 'H100' }), { profile: cpu, gpuIndices: [] }))).toThrow(
      'profile.gpuClass: required for engine vllm',
    );
    const llama = { ...cpu, engine: 'llamacpp' as const };
    expect(() => adapter.launch(spec(model({ engine: 'vllm', gpuClass: 'H100' }), { profile: llama, gpuIndices: [] }))).toThrow(
      'profile.engine: is llamacpp, this adapter starts vllm',
    );
  });
});

describe('VllmAdapter.validate', () => {
  it('applies the catalog rules with paths relative to the profile', () => {
    const p = model({ engine: 'vllm', gpuClass: 'H100' }).profiles[0];
    expect(adapter.validate(p)).toEqual([]);
    expect(adapter.validate({ ...p, gpuClass: undefined, gpusPerNode: 0 })).toEqual([{ path: 'gpuClass', message: 'required for engine vllm' }]);
    expect(adapter.validate({ ...p, tensorParallel: 2 })).toEqual([{ path: '', message: expect.stringContaining('must equal tensorParallel × pipelineParallel') }]);
  });
});
