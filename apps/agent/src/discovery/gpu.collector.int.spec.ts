import { afterEach, describe, expect, it } from 'vitest';
import { ExecFileCommandRunner } from './exec-file.runner';
import { parseFakeGpuSpec } from './fake-gpus.parser';
import { gpuClassMapper } from './gpu-class.parser';
import { GpuCollector, type GpuCollectorOptions } from './gpu.collector';
import { NVIDIA_SMI_QUERY_ARGS } from './nvidia-smi.parser';
import { installFakeNvidiaSmi, type FakeNvidiaSmi, type FakeNvidiaSmiVariant } from './test/fake-nvidia-smi.harness';
import { RecordingLogger } from './test/recording.logger';

const MIB = 1024 * 1024;
const options: GpuCollectorOptions = {
  nvidiaSmiPath: 'nvidia-smi',
  timeoutMs: 10_000,
  gpuClassOf: gpuClassMapper({ 'NVIDIA H100 80GB HBM3': 'H100-80GB' }),
  fakeGpuSeed: 'node-a',
};

describe('GpuCollector with a fake nvidia-smi first on PATH (real execFile)', () => {
  let fake: FakeNvidiaSmi | undefined;
  afterEach(() => fake?.remove());

  function collectorFor(variant: FakeNvidiaSmiVariant, extra: Partial<GpuCollectorOptions> = {}) {
    fake = installFakeNvidiaSmi(variant);
    const logger = new RecordingLogger();
    const collector = new GpuCollector(new ExecFileCommandRunner({ ...process.env, PATH: fake.path }), logger, { ...options, ...extra });
    return { collector, logger, fake };
  }

  it('reports the GPUs nvidia-smi lists, with classes mapped and the query it was given', async () => {
    const { collector, logger, fake } = collectorFor('rows');
    const result = await collector.collect();
    expect(fake.lastArgs()).toEqual(NVIDIA_SMI_QUERY_ARGS);
    expect(result.source).toBe('nvidia-smi');
    expect(result.problems).toEqual([]);
    expect(result.gpus.map((g) => [g.index, g.gpuClass, g.memoryTotalBytes / MIB, g.memoryUsedBytes! / MIB, g.utilizationPct])).toEqual([
      [0, 'H100-80GB', 81559, 19818, 100],
      [1, 'H100-80GB', 81559, 0, 0],
    ]);
    expect(logger.entries).toEqual([{ level: 'info', fields: { gpuSource: 'nvidia-smi', gpus: 2 }, message: '2 GPU(s) found by nvidia-smi' }]);
  });

  it('a driver without utilization.gpu (7-field rows) keeps every GPU, utilisation absent, no problems', async () => {
    const { collector } = collectorFor('rows-without-utilization');
    const result = await collector.collect();
    expect(result.problems).toEqual([]);
    expect(result.gpus).toHaveLength(2);
    for (const gpu of result.gpus) {
      expect(gpu).not.toHaveProperty('utilizationPct');
      expect(gpu.memoryTotalBytes).toBe(81559 * MIB);
    }
  });

  it('nvidia-smi exiting 9 (no driver) → CPU-only node, said once however often it is asked', async () => {
    const { collector, logger } = collectorFor('exit-9');
    for (let i = 0; i < 3; i++) expect(await collector.collect()).toEqual({ gpus: [], source: 'none', problems: [] });
    expect(logger.warnings()).toHaveLength(1);
    expect(logger.entries).toHaveLength(1);
    expect(logger.entries[0].message).toMatch(/^no GPUs: nvidia-smi: exited with code 9: NVIDIA-SMI has failed .*; this node reports as CPU-only$/);
  });

  it('no nvidia-smi on PATH → CPU-only node, said once', async () => {
    const logger = new RecordingLogger();
    const collector = new GpuCollector(new ExecFileCommandRunner({ ...process.env, PATH: '/nonexistent-llmgw-dir' }), logger, options);
    await collector.collect();
    expect(await collector.collect()).toEqual({ gpus: [], source: 'none', problems: [] });
    expect(logger.entries.map((e) => [e.level, e.message])).toEqual([['warn', 'no GPUs: nvidia-smi: not found on PATH; this node reports as CPU-only']]);
  });

  it('a hung nvidia-smi is a CPU-only answer after the timeout, not a hung discovery', async () => {
    const { collector } = collectorFor('hang', { timeoutMs: 300 });
    expect(await collector.collect()).toMatchObject({ gpus: [], source: 'none' });
  });

  it('logs again only when the situation changes: failing → answering → failing', async () => {
    const { collector, logger, fake } = collectorFor('exit-9');
    await collector.collect();
    fake.become('rows');
    expect((await collector.collect()).gpus).toHaveLength(2);
    await collector.collect();
    fake.become('exit-9');
    await collector.collect();
    await collector.collect();
    expect(logger.entries.map((e) => e.level)).toEqual(['warn', 'info', 'warn']);
    expect(logger.entries[1].message).toBe('nvidia-smi answers again: 2 GPU(s) found by nvidia-smi');
  });

  it('fake GPUs replace nvidia-smi (never run) and are loudly logged once', async () => {
    const { collector, logger, fake } = collectorFor('rows', { fakeGpus: parseFakeGpuSpec('8xH100-80GB').value });
    const first = await collector.collect();
    const second = await collector.collect();
    expect(first.source).toBe('fake');
    expect(first.gpus).toHaveLength(8);
    expect(second.gpus).toEqual(first.gpus);
    expect(fake.lastArgs()).toBeUndefined();
    expect(logger.entries).toHaveLength(1);
    expect(logger.entries[0]).toMatchObject({ level: 'warn', fields: { gpuSource: 'fake', gpus: 8, classes: ['8xH100-80GB'] } });
    expect(logger.entries[0].message).toMatch(/^SIMULATED GPUS: reporting 8 fake GPU\(s\)/);
  });
});

describe('GpuCollector row problems', () => {
  it('reports unreadable rows beside the GPUs that parsed, logging each new set of problems once', async () => {
    let output = '0, GPU-a, NVIDIA L4, 23034, 0, 30, 0, 5\ngarbage\n';
    const runner = { run: async () => output };
    const logger = new RecordingLogger();
    const collector = new GpuCollector(runner, logger, options);
    const first = await collector.collect();
    await collector.collect();
    expect(first.gpus.map((g) => g.uuid)).toEqual(['GPU-a']);
    expect(first.problems).toEqual([{ path: 'line 2', message: expect.stringContaining('GPU skipped: "garbage"') }]);
    expect(logger.warnings()).toHaveLength(1);
    output = '0, GPU-a, NVIDIA L4, 23034, 0, 30, 0, 5\n';
    expect((await collector.collect()).problems).toEqual([]);
    output = '0, GPU-a, NVIDIA L4, 23034, 0, 30, 0, 5\nother garbage\n';
    await collector.collect();
    expect(logger.warnings()).toHaveLength(2);
  });
});
