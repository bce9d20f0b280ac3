import { describe, expect, it } from 'vitest';
import type { NodeInventory } from './discovery.service';
import { formatBytes, formatInventoryTable } from './inventory.formatter';

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [81559 * 1024 * 1024, '79.6 GiB'],
    [2 * 1024 ** 4, '2.0 TiB'],
  ])('%d → %s', (bytes, shown) => expect(formatBytes(bytes)).toBe(shown));
});

describe('formatInventoryTable', () => {
  const inventory: NodeInventory = {
    gpus: [
      { index: 0, uuid: 'GPU-a', name: 'NVIDIA L4', gpuClass: 'L4', memoryTotalBytes: 23034 * 1024 * 1024, healthy: true },
      { index: 1, uuid: 'GPU-b', name: 'NVIDIA L4', gpuClass: 'L4', memoryTotalBytes: 23034 * 1024 * 1024, memoryUsedBytes: 0, utilizationPct: 0, temperatureC: 30, eccErrors: 3, healthy: false },
    ],
    gpuSource: 'nvidia-smi',
    cpuCores: 8,
    memoryBytes: 64 * 1024 ** 3,
    cache: { dir: '/c', totalBytes: 100 * 1024 ** 3, freeBytes: 40 * 1024 ** 3, entries: [{ name: 'w1', sizeBytes: 2048, modifiedAt: Date.UTC(2026, 0, 2) }] },
    labels: { zone: 'a' },
    problems: [{ path: 'line 3', message: 'bad row' }],
  };

  it('prints unknown values as "-" and measured zeros as 0', () => {
    const lines = formatInventoryTable(inventory).split('\n');
    expect(lines[0]).toBe('GPUs: 2 (source: nvidia-smi)');
    expect(lines[2].split(/\s{2,}/)).toEqual(['', '0', 'L4', 'NVIDIA L4', '22.5 GiB', '-', '-', '-', '-', 'ok', 'GPU-a']);
    expect(lines[3].split(/\s{2,}/)).toEqual(['', '1', 'L4', 'NVIDIA L4', '22.5 GiB', '0 B', '0%', '30C', '3', 'UNHEALTHY', 'GPU-b']);
    expect(lines).toContain('  problem: line 3: bad row');
    expect(lines).toContain('Cache: /c (free 40.0 GiB of 100.0 GiB, 1 entries)');
    expect(lines).toContain('  w1    2.0 KiB  2026-01-02T00:00:00.000Z');
    expect(lines).toContain('Fabric: -');
  });

  it('says when the GPUs are simulated or absent', () => {
    expect(formatInventoryTable({ ...inventory, gpus: [], gpuSource: 'none', problems: [] })).toMatch(/^GPUs: 0 \(source: none, CPU-only node\)\nCPU: 8 cores/);
    expect(formatInventoryTable({ ...inventory, gpuSource: 'fake' })).toMatch(/^GPUs: 2 \(source: fake, SIMULATED\)/);
  });
});
