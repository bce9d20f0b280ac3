import { describe, expect, it } from 'vitest';
import { percentile, percentileInterval } from './bench-report';

const ranks = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

describe('percentileInterval', () => {
  it('gives the textbook order statistics for a median', () => {
    // Ranks 40 and 61 of 100 and 2 and 9 of 10 are the exact 95 % interval for the median (binomial tables).
    expect(percentileInterval(ranks(100), 50)).toEqual({ lower: 40, upper: 61 });
    expect(percentileInterval(ranks(10), 50)).toEqual({ lower: 2, upper: 9 });
  });

  it('leaves a bound out where the samples cannot give it', () => {
    // With 5 samples the extremes hold the median with 1 − 2/32 < 95 %: no interval.
    expect(percentileInterval(ranks(5), 50)).toEqual({});
    // A p99 of 330 samples has no upper bound: P(all 330 below it) = 0.99^330 ≈ 3.6 % > 2.5 %.
    expect(percentileInterval(ranks(330), 99)).toEqual({ lower: 323 });
  });

  it('pins a p99 down once there are a few thousand samples, around the point estimate', () => {
    const samples = ranks(2000).reverse();
    const { lower, upper } = percentileInterval(samples, 99);
    expect(lower).toBe(1971);
    expect(upper).toBe(1989);
    const point = percentile(samples, 99);
    expect(point).toBeGreaterThanOrEqual(lower as number);
    expect(point).toBeLessThanOrEqual(upper as number);
  });

  it('answers nothing for no samples or a percentile or confidence out of range', () => {
    expect(percentileInterval([], 50)).toEqual({});
    expect(percentileInterval(ranks(100), 0)).toEqual({});
    expect(percentileInterval(ranks(100), 100)).toEqual({});
    expect(percentileInterval(ranks(100), 50, 1)).toEqual({});
  });

  it('widens with the confidence asked for', () => {
    const at90 = percentileInterval(ranks(1000), 90, 0.9);
    const at99 = percentileInterval(ranks(1000), 90, 0.99);
    expect(at99.lower as number).toBeLessThan(at90.lower as number);
    expect(at99.upper as number).toBeGreaterThan(at90.upper as number);
  });
});
