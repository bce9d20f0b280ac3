import { cacheName } from '@llmgw/catalog';
import { describe, expect, it } from 'vitest';
import { planReplicaLaunch, type LaunchSettings } from './engine-launch.planner';
import type { ReplicaSpec } from './replica.model';

const SETTINGS: LaunchSettings = { cacheDir: '/var/lib/llmgw/cache', engineHost: '10.0.0.5', vllmBinary: '/opt/vllm/bin/vllm', llamaServerBinary: 'llama-server' };
const HTTP_SOURCE = 'https://models.example/tiny.gguf';

const spec = (over: Partial<ReplicaSpec> = {}): ReplicaSpec => ({
  replicaId: 'r-1',
  model: 'tiny',
  engine: 'llamacpp',
  weightsSource: HTTP_SOURCE,
  cacheName: cacheName(HTTP_SOURCE) as string,
  servedName: 'tiny',
  aliases: [],
  gpuIndices: [],
  rank: 0,
  members: [],
  tensorParallel: 1,
  pipelineParallel: 1,
  engineArgs: [],
  env: {},
  ...over,
});

describe('planReplicaLaunch', () => {
  it('llama.cpp on CPU: weights from the cache, argv from @llmgw/engines, no GPU visible', () => {
    const { plan, weightsPath, cached } = planReplicaLaunch(spec({ contextLength: 4096, engineArgs: ['--threads', '2'], env: { FOO: 'bar' } }), 8000, SETTINGS);
    expect(weightsPath).toBe(`/var/lib/llmgw/cache/${cacheName(HTTP_SOURCE)}`);
    expect(cached).toBe(true);
    expect(plan).toMatchObject({ role: 'server', command: 'llama-server', port: 8000, readiness: 'http-503-until-ready', healthPath: '/health' });
    expect(plan.args).toEqual(['-m', weightsPath, '--host', '10.0.0.5', '--port', '8000', '--metrics', '--alias', 'tiny', '-c', '4096', '-ngl', '0', '--threads', '2']);
    expect(plan.env).toEqual({ FOO: 'bar', CUDA_VISIBLE_DEVICES: '' });
  });

  it('vLLM on the GPUs placement chose, with its binary and tensor parallelism', () => {
    const { plan } = planReplicaLaunch(spec({ engine: 'vllm', gpuIndices: [2, 3], tensorParallel: 2, aliases: ['tiny-latest'] }), 9000, SETTINGS);
    expect(plan).toMatchObject({ command: '/opt/vllm/bin/vllm', readiness: 'refuses-until-ready' });
    expect(plan.args.slice(0, 2)).toEqual(['serve', `/var/lib/llmgw/cache/${cacheName(HTTP_SOURCE)}`]);
    expect(plan.args).toContain('--tensor-parallel-size');
    expect(plan.env).toMatchObject({ CUDA_VISIBLE_DEVICES: '2,3', CUDA_DEVICE_ORDER: 'PCI_BUS_ID' });
  });

  it('file:// weights are used in place; localPath wins', () => {
    expect(planReplicaLaunch(spec({ weightsSource: 'file:///models/a.gguf', cacheName: '' }), 8000, SETTINGS)).toMatchObject({ weightsPath: '/models/a.gguf', cached: false });
    expect(planReplicaLaunch(spec({ localPath: '/mnt/nfs/a.gguf' }), 8000, SETTINGS)).toMatchObject({ weightsPath: '/mnt/nfs/a.gguf', cached: false });
  });

  it('the simulator override keeps the engine argv, adds --engine, and drops setup', () => {
    const sim = { command: '/usr/bin/node', args: ['/repo/tools/run.cjs', '/repo/tools/sim-engine/src/main.ts'] };
    const { plan } = planReplicaLaunch(spec(), 8000, { ...SETTINGS, simEngine: sim });
    expect(plan.command).toBe('/usr/bin/node');
    expect(plan.args.slice(0, 4)).toEqual(['/repo/tools/run.cjs', '/repo/tools/sim-engine/src/main.ts', '-m', `/var/lib/llmgw/cache/${cacheName(HTTP_SOURCE)}`]);
    expect(plan.args.slice(-2)).toEqual(['--engine', 'llamacpp']);
    const worker = planReplicaLaunch(
      spec({ engine: 'vllm', gpuIndices: [0], tensorParallel: 2, rank: 1, leaderAddress: '10.0.0.1:6379', members: [{ nodeId: 'a', address: '10.0.0.1', rank: 0 }, { nodeId: 'b', address: '10.0.0.2', rank: 1 }] }),
      8000,
      { ...SETTINGS, simEngine: sim },
    );
    expect(worker.plan).toMatchObject({ role: 'worker', command: '/usr/bin/node', setup: [] });
  });

  it.each([
    ['a cache name that is not the source’s', spec({ cacheName: 'llmgw-0000000000000000-tiny.gguf' }), /cacheName: .* is not the cache name of https:\/\/models.example\/tiny.gguf/],
    ['a traversal as cache name', spec({ cacheName: '../../etc/passwd' }), /is not the cache name/],
    ['a relative local path', spec({ localPath: 'models/a.gguf' }), /localPath: must be an absolute path/],
    ['a file:// source with ..', spec({ weightsSource: 'file:///models/../etc/passwd', cacheName: '' }), /must not contain \. or \.\. segments/],
    ['a file:// source with a percent-encoded ..', spec({ weightsSource: 'file:///models/%2e%2e/etc/passwd', cacheName: '' }), /must not contain \. or \.\. segments/],
    ['a GPU count that does not match tensor parallelism', spec({ engine: 'vllm', gpuIndices: [0], tensorParallel: 2 }), /must equal/],
    ['vLLM without a GPU', spec({ engine: 'vllm' }), /gpuClass: required for engine vllm/],
    ['a reserved flag in the engine args', spec({ engineArgs: ['--port', '1'] }), /--port is set by llmgw/],
    ['a malformed leader address', spec({ engine: 'vllm', gpuIndices: [0], tensorParallel: 2, leaderAddress: 'nowhere', members: [{ nodeId: 'a', address: 'a', rank: 0 }, { nodeId: 'b', address: 'b', rank: 1 }] }), /leaderAddress: expected host:port/],
  ])('refuses %s with the reason', (_what, s, message) => {
    expect(() => planReplicaLaunch(s, 8000, SETTINGS)).toThrow(message);
  });
});
