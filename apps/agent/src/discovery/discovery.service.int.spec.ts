import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DiscoveryService, type DiscoveryOptions } from './discovery.service';
import { ExecFileCommandRunner } from './exec-file.runner';
import { fakeGpus, parseFakeGpuSpec } from './fake-gpus.parser';
import { installFakeNvidiaSmi, type FakeNvidiaSmi } from './test/fake-nvidia-smi.harness';
import { RecordingLogger } from './test/recording.logger';

describe('DiscoveryService', () => {
  let cacheDir: string;
  let fake: FakeNvidiaSmi | undefined;
  beforeEach(() => {
    cacheDir = mkdtempSync(join(tmpdir(), 'llmgw-inventory-'));
  });
  afterEach(() => {
    fake?.remove();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  const base = (extra: Partial<DiscoveryOptions> = {}): DiscoveryOptions => ({
    cacheDir,
    labels: { zone: 'a' },
    gpuClassMap: { 'NVIDIA H100 80GB HBM3': 'H100-80GB' },
    fakeGpus: [],
    nvidiaSmiPath: 'nvidia-smi',
    nvidiaSmiTimeoutMs: 10_000,
    ...extra,
  });

  it('puts GPUs, host, cache, labels and fabric into one inventory; no fabric = no key', async () => {
    fake = installFakeNvidiaSmi('rows-without-utilization');
    const logger = new RecordingLogger();
    const service = new DiscoveryService(base(), { logger, runner: new ExecFileCommandRunner({ ...process.env, PATH: fake.path }) });
    const inventory = await service.discover();
    expect(inventory.gpuSource).toBe('nvidia-smi');
    expect(inventory.gpus.map((g) => g.gpuClass)).toEqual(['H100-80GB', 'H100-80GB']);
    expect(inventory.cache.dir).toBe(cacheDir);
    expect(inventory.labels).toEqual({ zone: 'a' });
    expect(inventory).not.toHaveProperty('fabric');
    expect(inventory.cpuCores).toBeGreaterThan(0);
    expect(JSON.stringify(inventory)).not.toContain('utilizationPct');
  });

  it('fake GPUs use the host name as UUID seed unless one is given', async () => {
    const groups = parseFakeGpuSpec('2xL4-24GB').value;
    const logger = new RecordingLogger();
    const byHost = await new DiscoveryService(base({ fakeGpus: groups, fabric: 'ib-0' }), { logger }).discover();
    expect(byHost.gpus).toEqual(fakeGpus(groups, hostname()));
    expect(byHost.fabric).toBe('ib-0');
    const seeded = await new DiscoveryService(base({ fakeGpus: groups, fakeGpuSeed: 'node-9' }), { logger }).discover();
    expect(seeded.gpus).toEqual(fakeGpus(groups, 'node-9'));
  });
});
