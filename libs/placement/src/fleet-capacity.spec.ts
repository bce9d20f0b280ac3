import type { Model } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { fleetCapacity } from './fleet-capacity';
import { cpuProfile, GB, gpu, gpuProfile, node } from './test/fleet.builder';

function model(profiles: Model['profiles'], sizeBytes = 10 * GB): Model {
  return { name: 'm', aliases: [], source: 'hf://org/m/m.gguf@main', sizeBytes, replicas: { min: 1, max: 1 }, profiles };
}

describe('fleetCapacity', () => {
  it('counts one-GPU replicas by GPUs, as if every node were healthy, uncordoned and empty', () => {
    const nodes = [
      node('a', 8),
      node('b', 8, 'H100', { state: 'lost', cordoned: true }),
      node('c', 4, 'H100', { gpus: [gpu(0, 'H100', { healthy: false, memoryUsedBytes: 80 * GB }), gpu(1), gpu(2), gpu(3)] }),
      node('d', 8, 'A100'),
    ];
    expect(fleetCapacity({ model: model([gpuProfile('H100', 1)]) }, nodes, 1000)).toBe(20);
    expect(fleetCapacity({ model: model([gpuProfile('H100', 4)]) }, nodes, 1000)).toBe(5);
    // Any profile counts: the second one fits the A100s.
    expect(fleetCapacity({ model: model([gpuProfile('H100', 8), gpuProfile('A100', 8)]) }, nodes, 1000)).toBe(3);
  });

  it('counts CPU replicas by cores and host memory: the stated memory, else the weights', () => {
    const cpu = (cores: number, memoryGb: number) => node(`cpu-${cores}-${memoryGb}`, 0, 'H100', { cpuCores: cores, memoryBytes: memoryGb * GB });
    // 16 cores, 64 GB: 10 GB of weights each → 6; 1 GB stated each → 16 (cores); 2 cores → 2.
    expect(fleetCapacity({ model: model([cpuProfile()]) }, [cpu(16, 64)], 1000)).toBe(6);
    expect(fleetCapacity({ model: model([cpuProfile({ memoryBytes: GB })]) }, [cpu(16, 64)], 1000)).toBe(16);
    expect(fleetCapacity({ model: model([cpuProfile({ memoryBytes: GB })]) }, [cpu(16, 64), cpu(2, 64)], 1000)).toBe(18);
  });

  it('ignores the disk (a cache can be collected) and stops counting at the limit', () => {
    const full = node('a', 8, 'H100', { cache: { dir: '/c', totalBytes: 100 * GB, freeBytes: 0, entries: [] } });
    expect(fleetCapacity({ model: model([gpuProfile('H100', 1)], 500 * GB), cacheName: 'x' }, [full], 1000)).toBe(8);
    expect(fleetCapacity({ model: model([gpuProfile('H100', 1)]) }, [full], 3)).toBe(3);
    expect(fleetCapacity({ model: model([gpuProfile('H100', 1)]) }, [], 3)).toBe(0);
  });
});
