import { describe, expect, it } from 'vitest';
import { gpuClassMapper, parseGpuClassMap } from './gpu-class.parser';

describe('parseGpuClassMap', () => {
  it('maps full reported names (spaces and all) to classes; unmapped names are their own class', () => {
    const { value, problems } = parseGpuClassMap(' NVIDIA H100 80GB HBM3 = H100-80GB ; Tesla P100-PCIE-16GB=P100;');
    expect(problems).toEqual([]);
    expect(value).toEqual({ 'NVIDIA H100 80GB HBM3': 'H100-80GB', 'Tesla P100-PCIE-16GB': 'P100' });
    const classOf = gpuClassMapper(value);
    expect(classOf('NVIDIA H100 80GB HBM3')).toBe('H100-80GB');
    expect(classOf('NVIDIA L4')).toBe('NVIDIA L4');
    expect(classOf('toString')).toBe('toString');
  });

  it('keeps commas inside names (entries are separated by ";")', () => {
    expect(parseGpuClassMap('Odd, Name=X').value).toEqual({ 'Odd, Name': 'X' });
  });

  it('is empty for an empty string', () => {
    expect(parseGpuClassMap('')).toEqual({ value: {}, problems: [] });
  });

  it.each([
    ['H100', /\[0\]: "H100" is not <reported name>=<class>/],
    ['=H100', /\[0\]: "=H100" has no reported name/],
    ['A=X;B=', /\[1\]: "B=" has no class/],
    ['A=X;A=Y', /\[1\]: "A" is mapped twice/],
  ])('%j is refused with the entry named', (spec, message) => {
    const { problems } = parseGpuClassMap(spec, 'LLMGW_AGENT_GPU_CLASS_MAP');
    expect(problems).toHaveLength(1);
    expect(`${problems[0].path}: ${problems[0].message}`).toMatch(/^LLMGW_AGENT_GPU_CLASS_MAP\[/);
    expect(`${problems[0].path}: ${problems[0].message}`).toMatch(message);
  });

  it('reports every bad entry, not only the first', () => {
    expect(parseGpuClassMap('a;b;c=d;e').problems.map((p) => p.path)).toEqual(['gpuClassMap[0]', 'gpuClassMap[1]', 'gpuClassMap[3]']);
  });
});
