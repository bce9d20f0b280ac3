import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '@llmgw/config';
import { runDiscoverCommand } from './discover.command';
import { discoveryEnvSchema, discoveryOptions } from './discovery.config';
import { ExecFileCommandRunner } from './exec-file.runner';
import { installFakeNvidiaSmi, type FakeNvidiaSmi } from './test/fake-nvidia-smi.harness';

const ARGV = ['node', 'llmgw-agent', 'discover'];

function capture() {
  const out = { stdout: '', stderr: '' };
  return { out, io: { stdout: (t: string) => void (out.stdout += t), stderr: (t: string) => void (out.stderr += t) } };
}

describe('runDiscoverCommand (in process)', () => {
  let dir: string;
  let fake: FakeNvidiaSmi | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-discover-'));
  });
  afterEach(() => {
    fake?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--help prints usage and exits 0', async () => {
    const { out, io } = capture();
    expect(await runDiscoverCommand([...ARGV, '--help'], { ...io, env: {} })).toBe(0);
    expect(out.stdout).toMatch(/^usage: llmgw-agent discover \[--json\]/);
  });

  it('an unknown flag exits 2 naming it', async () => {
    const { out, io } = capture();
    expect(await runDiscoverCommand([...ARGV, '--jsn'], { ...io, env: {} })).toBe(2);
    expect(out.stderr).toMatch(/unknown argument\(s\) --jsn/);
    expect(out.stdout).toBe('');
  });

  it('a cache path that is a file exits 1 with the path named', async () => {
    writeFileSync(join(dir, 'file'), 'x');
    const { out, io } = capture();
    const env = { LLMGW_AGENT_CACHE_DIR: join(dir, 'file'), LLMGW_AGENT_FAKE_GPUS: '1xL4-24GB' };
    expect(await runDiscoverCommand([...ARGV, '--json'], { ...io, env })).toBe(1);
    expect(out.stderr).toContain(`cache directory ${join(dir, 'file')} cannot be read`);
    expect(out.stdout).toBe('');
  });

  it('prints the table through the given runner (fake nvidia-smi, real execFile)', async () => {
    fake = installFakeNvidiaSmi('rows');
    const { out, io } = capture();
    const runner = new ExecFileCommandRunner({ ...process.env, PATH: fake.path });
    expect(await runDiscoverCommand(ARGV, { ...io, runner, env: { LLMGW_AGENT_CACHE_DIR: dir } })).toBe(0);
    expect(out.stdout).toMatch(/^GPUs: 2 \(source: nvidia-smi\)\n/);
    expect(out.stdout).toMatch(/NVIDIA H100 80GB HBM3 +79\.6 GiB +19\.4 GiB +100% +59C +0 +ok +GPU-0{8}-/);
    expect(out.stdout).toContain(`Cache: ${dir} (free `);
    expect(out.stdout).toContain('Labels: -\nFabric: -\n');
  });
});

describe('discovery settings from the environment', () => {
  it('defaults: cache ./.llmgw/cache made absolute, nvidia-smi on PATH, 10 s timeout, nothing faked', () => {
    expect(discoveryOptions(loadConfig(discoveryEnvSchema, {}))).toEqual({
      cacheDir: resolve('./.llmgw/cache'),
      labels: {},
      gpuClassMap: {},
      fakeGpus: [],
      nvidiaSmiPath: 'nvidia-smi',
      nvidiaSmiTimeoutMs: 10_000,
    });
  });

  it('every variable parsed', () => {
    const options = discoveryOptions(
      loadConfig(discoveryEnvSchema, {
        LLMGW_AGENT_CACHE_DIR: '/var/lib/llmgw/cache',
        LLMGW_AGENT_LABELS: 'zone=eu-1',
        LLMGW_AGENT_FABRIC: 'ib-0',
        LLMGW_AGENT_GPU_CLASS_MAP: 'NVIDIA H100 80GB HBM3=H100-80GB;Tesla P100-PCIE-16GB=P100',
        LLMGW_AGENT_FAKE_GPUS: '2xA100-40GB',
        LLMGW_AGENT_NVIDIA_SMI: '/usr/bin/nvidia-smi',
        LLMGW_AGENT_NVIDIA_SMI_TIMEOUT: '3s',
      }),
      { fakeGpuSeed: 'node-7' },
    );
    expect(options).toEqual({
      cacheDir: '/var/lib/llmgw/cache',
      labels: { zone: 'eu-1' },
      fabric: 'ib-0',
      gpuClassMap: { 'NVIDIA H100 80GB HBM3': 'H100-80GB', 'Tesla P100-PCIE-16GB': 'P100' },
      fakeGpus: [{ count: 2, gpuClass: 'A100-40GB', memoryBytes: 40 * 1024 ** 3 }],
      fakeGpuSeed: 'node-7',
      nvidiaSmiPath: '/usr/bin/nvidia-smi',
      nvidiaSmiTimeoutMs: 3000,
    });
  });

  it('names every bad variable at once', () => {
    expect(() =>
      loadConfig(discoveryEnvSchema, { LLMGW_AGENT_GPU_CLASS_MAP: 'H100', LLMGW_AGENT_FAKE_GPUS: '0xH100-80GB', LLMGW_AGENT_NVIDIA_SMI_TIMEOUT: 'soon' }),
    ).toThrow(/3 problems[\s\S]*LLMGW_AGENT_GPU_CLASS_MAP="H100": entry\[0\][\s\S]*LLMGW_AGENT_FAKE_GPUS="0xH100-80GB": entry\[0\]: count 0[\s\S]*LLMGW_AGENT_NVIDIA_SMI_TIMEOUT/);
  });
});
