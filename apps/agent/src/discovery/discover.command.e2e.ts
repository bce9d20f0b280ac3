import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { childEnv } from './test/child-env.helper';
import { installFakeNvidiaSmi, type FakeNvidiaSmi, type FakeNvidiaSmiVariant } from './test/fake-nvidia-smi.harness';

const REPO_ROOT = resolve(__dirname, '../../../..');
const ENTRY = 'apps/agent/src/discovery/discover.main.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `discover` as its own process, with only the given LLMGW_AGENT_* settings. */
function runDiscover(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done) => {
    execFile(process.execPath, ['tools/run.cjs', ENTRY, ...args], { cwd: REPO_ROOT, env: childEnv(env), timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

describe('llmgw-agent discover as a real process, fake nvidia-smi first on PATH', () => {
  let fake: FakeNvidiaSmi | undefined;
  let cacheDir: string;
  beforeEach(() => {
    cacheDir = mkdtempSync(join(tmpdir(), 'llmgw-discover-cache-'));
  });
  afterEach(() => {
    fake?.remove();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  function settings(variant: FakeNvidiaSmiVariant, extra: Record<string, string> = {}): Record<string, string> {
    fake = installFakeNvidiaSmi(variant);
    return { PATH: fake.path, LLMGW_AGENT_CACHE_DIR: cacheDir, ...extra };
  }

  it('--json with a driver that lacks utilization.gpu: every GPU kept, the utilisation key missing (not 0)', async () => {
    const run = await runDiscover(['--json'], settings('rows-without-utilization', { LLMGW_AGENT_GPU_CLASS_MAP: 'NVIDIA H100 80GB HBM3=H100-80GB' }));
    expect(run.code, run.stderr).toBe(0);
    const inventory = JSON.parse(run.stdout);
    expect(inventory.gpuSource).toBe('nvidia-smi');
    expect(inventory.gpus).toHaveLength(2);
    for (const gpu of inventory.gpus) {
      expect(gpu.utilizationPct ?? null).toBeNull();
      expect(gpu.utilizationPct).not.toBe(0);
      expect(gpu.gpuClass).toBe('H100-80GB');
      expect(gpu.memoryTotalBytes).toBe(81559 * 1024 * 1024);
    }
    expect(inventory.problems).toEqual([]);
  });

  it('--json with full rows reports measured utilisation, including a real 0', async () => {
    mkdirSync(join(cacheDir, 'weights-dir'));
    writeFileSync(join(cacheDir, 'weights-dir', 'model.gguf'), Buffer.alloc(4096));
    const run = await runDiscover(['--json'], settings('rows', { LLMGW_AGENT_LABELS: 'zone=eu-1,disk=nvme', LLMGW_AGENT_FABRIC: 'ib-0' }));
    expect(run.code, run.stderr).toBe(0);
    const inventory = JSON.parse(run.stdout);
    expect(inventory.gpus.map((g: { utilizationPct: number }) => g.utilizationPct)).toEqual([100, 0]);
    expect(inventory.labels).toEqual({ zone: 'eu-1', disk: 'nvme' });
    expect(inventory.fabric).toBe('ib-0');
    expect(inventory.cpuCores).toBeGreaterThan(0);
    expect(inventory.memoryBytes).toBeGreaterThan(0);
    expect(inventory.cache).toMatchObject({ dir: cacheDir, entries: [{ name: 'weights-dir', sizeBytes: 4096 }] });
    expect(inventory.cache.totalBytes).toBeGreaterThan(0);
    expect(inventory.cache.freeBytes).toBeGreaterThan(0);
  });

  it('the table shows an unknown utilisation as "-"', async () => {
    const run = await runDiscover([], settings('rows-without-utilization'));
    expect(run.code, run.stderr).toBe(0);
    const header = run.stdout.split('\n').find((l) => l.includes('UTIL'))!;
    const row = run.stdout.split('\n').find((l) => l.includes('GPU-00000000-0000-0000-0000-000000000000'))!;
    const utilCell = row.slice(header.indexOf('UTIL'), header.indexOf('TEMP')).trim();
    expect(utilCell).toBe('-');
  });

  it('nvidia-smi exiting 9 → a CPU-only node, said once on stderr, JSON on stdout still clean', async () => {
    const run = await runDiscover(['--json'], settings('exit-9'));
    expect(run.code, run.stderr).toBe(0);
    const inventory = JSON.parse(run.stdout);
    expect(inventory.gpus).toEqual([]);
    expect(inventory.gpuSource).toBe('none');
    expect(run.stderr.match(/CPU-only/g)).toHaveLength(1);
    expect(run.stderr).toContain('exited with code 9');
  });

  it('LLMGW_AGENT_FAKE_GPUS reports the simulated inventory and warns loudly', async () => {
    const run = await runDiscover(['--json'], settings('rows', { LLMGW_AGENT_FAKE_GPUS: '8xH100-80GB' }));
    expect(run.code, run.stderr).toBe(0);
    const inventory = JSON.parse(run.stdout);
    expect(inventory.gpuSource).toBe('fake');
    expect(inventory.gpus).toHaveLength(8);
    expect(run.stderr).toMatch(/warn: SIMULATED GPUS: reporting 8 fake GPU\(s\)/);
    expect(fake!.lastArgs()).toBeUndefined();
  });

  it('bad settings: exit 2, every bad variable named, nothing on stdout', async () => {
    const run = await runDiscover(['--json'], settings('rows', { LLMGW_AGENT_LABELS: 'zone', LLMGW_AGENT_FAKE_GPUS: '2xT4' }));
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('LLMGW_AGENT_LABELS="zone"');
    expect(run.stderr).toContain('LLMGW_AGENT_FAKE_GPUS="2xT4"');
  });
});
