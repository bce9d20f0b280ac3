import { describe, expect, it } from 'vitest';
import { LoadAverage } from './load-average';

describe('LoadAverage', () => {
  it('moves towards the value held by 1 − e^(−dt/τ) over each stretch', () => {
    const a = new LoadAverage(1_000);
    expect(a.read(0)).toBe(0);
    a.set(0, 4);
    expect(a.read(0)).toBe(0);
    expect(a.read(1_000)).toBeCloseTo(4 * (1 - Math.exp(-1)));
    expect(a.read(60_000)).toBeCloseTo(4);
    // From t = 1 s the value is 0: the average decays from where it got to.
    a.set(1_000, 0);
    const at1 = 4 * (1 - Math.exp(-1));
    expect(a.read(2_000)).toBeCloseTo(at1 * Math.exp(-1));
  });

  it('weighs values by how long they held, not by how often they changed', () => {
    // 3 for 9 s and 1 for 1 s against 1 for 9 s and 3 for 1 s, changes ten times as often in the second.
    const steady = new LoadAverage(5_000);
    steady.set(0, 3);
    steady.set(9_000, 1);
    const flicker = new LoadAverage(5_000);
    for (let t = 0; t < 9_000; t += 100) flicker.set(t, 1);
    flicker.set(9_000, 3);
    expect(steady.read(10_000)).toBeGreaterThan(flicker.read(10_000));
    expect(steady.read(10_000)).toBeGreaterThan(2);
    expect(flicker.read(10_000)).toBeLessThan(2);
  });

  it('ignores time running backwards and refuses a bad time constant', () => {
    const a = new LoadAverage(1_000);
    a.set(5_000, 2);
    a.set(4_000, 6); // an earlier time: no stretch is counted, the new value holds from 5 s
    expect(a.read(5_000)).toBe(0);
    expect(a.read(6_000)).toBeCloseTo(6 * (1 - Math.exp(-1)));
    expect(() => new LoadAverage(0)).toThrow(RangeError);
    expect(() => new LoadAverage(Number.NaN)).toThrow(RangeError);
  });
});
