import { describe, expect, it } from 'vitest';
import { parseLabels } from './labels.parser';

describe('parseLabels', () => {
  it('parses key=value pairs, trimming, allowing empty values', () => {
    expect(parseLabels('zone=eu-1, disk = nvme ,topology.kubernetes.io/rack=r7,spare=')).toEqual({
      value: { zone: 'eu-1', disk: 'nvme', 'topology.kubernetes.io/rack': 'r7', spare: '' },
      problems: [],
    });
  });

  it.each([
    ['zone', /"zone" is not key=value/],
    ['=eu', /label key "" must be/],
    ['-x=1', /label key "-x" must be/],
    ['a=1,a=2', /label "a" is set twice/],
  ])('%j is refused', (spec, message) => {
    const { problems } = parseLabels(spec);
    expect(problems).toHaveLength(1);
    expect(problems[0].message).toMatch(message);
  });
});
