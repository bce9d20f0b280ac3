import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fakeGpus, parseFakeGpuSpec } from './fake-gpus.parser';

const GIB = 1024 ** 3;

describe('parseFakeGpuSpec and fakeGpus', () => {
  it('8xH100-80GB → eight 80 GiB GPUs of class H100-80GB', () => {
    const { value, problems } = parseFakeGpuSpec('8xH100-80GB');
    expect(problems).toEqual([]);
    expect(value).toEqual([{ count: 8, gpuClass: 'H100-80GB', memoryBytes: 80 * GIB }]);
    const gpus = fakeGpus(value, 'node-a');
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(gpus.every((g) => g.gpuClass === 'H100-80GB' && g.memoryTotalBytes === 80 * GIB && g.healthy)).toBe(true);
    expect(gpus[0].name).toBe('Fake H100-80GB');
    // Nothing is measured on a fake GPU: unknown, not zero.
    expect(gpus[0]).not.toHaveProperty('utilizationPct');
    expect(gpus[0]).not.toHaveProperty('memoryUsedBytes');
  });

  it('mixed groups index across groups; explicit :<N>GB gives memory when the class has no size', () => {
    const { value, problems } = parseFakeGpuSpec(' 2xA100-40GB , 1xL4-24GB,1xT4:16GB');
    expect(problems).toEqual([]);
    const gpus = fakeGpus(value, 'n');
    expect(gpus.map((g) => [g.index, g.gpuClass, g.memoryTotalBytes / GIB])).toEqual([
      [0, 'A100-40GB', 40],
      [1, 'A100-40GB', 40],
      [2, 'L4-24GB', 24],
      [3, 'T4', 16],
    ]);
  });

  it('UUIDs are deterministic per seed, distinct within a node and across seeds, and shaped like real ones', () => {
    const groups = parseFakeGpuSpec('4xH100-80GB').value;
    const a = fakeGpus(groups, 'node-a').map((g) => g.uuid);
    expect(fakeGpus(groups, 'node-a').map((g) => g.uuid)).toEqual(a);
    expect(new Set(a).size).toBe(4);
    const b = fakeGpus(groups, 'node-b').map((g) => g.uuid);
    expect(a.some((u) => b.includes(u))).toBe(false);
    for (const u of a) expect(u).toMatch(/^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });

  it.each([
    ['H100-80GB', /"H100-80GB" is not <count>x<class>/],
    ['0xH100-80GB', /count 0 must be 1..64/],
    ['65xH100-80GB', /count 65 must be 1..64/],
    ['2xT4', /no memory size for "T4"/],
    ['2xH100-0GB', /memory 0GB must be positive/],
    ['8xH100-80GB,', /\[1\]: empty entry/],
    ['2 H100', /is not <count>x<class>/],
  ])('%j is refused with the entry named', (spec, message) => {
    const { value, problems } = parseFakeGpuSpec(spec);
    expect(problems).toHaveLength(1);
    expect(`${problems[0].path}: ${problems[0].message}`).toMatch(message);
    expect(value.length).toBeLessThanOrEqual(1);
  });

  it('an empty spec means no fake GPUs', () => {
    expect(parseFakeGpuSpec('')).toEqual({ value: [], problems: [] });
  });

  it('property: any well-formed spec yields sum(count) GPUs indexed 0..n-1 with unique UUIDs', () => {
    const group = fc.record({ count: fc.integer({ min: 1, max: 64 }), cls: fc.constantFrom('H100', 'A100', 'L4', 'MI300X'), gb: fc.integer({ min: 1, max: 192 }) });
    fc.assert(
      fc.property(fc.array(group, { minLength: 1, maxLength: 5 }), fc.string(), (groups, seed) => {
        const spec = groups.map((g) => `${g.count}x${g.cls}-${g.gb}GB`).join(',');
        const { value, problems } = parseFakeGpuSpec(spec);
        expect(problems).toEqual([]);
        const gpus = fakeGpus(value, seed);
        const n = groups.reduce((s, g) => s + g.count, 0);
        expect(gpus.map((g) => g.index)).toEqual([...Array(n).keys()]);
        expect(new Set(gpus.map((g) => g.uuid)).size).toBe(n);
      }),
      { numRuns: 50 },
    );
  });
});
