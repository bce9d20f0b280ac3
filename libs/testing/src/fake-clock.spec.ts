import type { Clock, Rng } from '@llmgw/domain';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FAKE_CLOCK_START_MS, FakeClock, SeededRng } from './fake-clock';

describe('FakeClock', () => {
  it('stands still until advanced or set', () => {
    const clock: Clock = new FakeClock();
    expect(clock.now()).toBe(FAKE_CLOCK_START_MS);
    expect(clock.now()).toBe(FAKE_CLOCK_START_MS);
    const fake = clock as FakeClock;
    expect(fake.advance(1_500)).toBe(FAKE_CLOCK_START_MS + 1_500);
    expect(clock.now()).toBe(FAKE_CLOCK_START_MS + 1_500);
    fake.set(42);
    expect(clock.now()).toBe(42);
  });

  it('refuses to go backwards through advance and refuses non-finite times', () => {
    const clock = new FakeClock(1_000);
    expect(() => clock.advance(-1)).toThrow(/negative/);
    expect(() => clock.advance(Number.NaN)).toThrow(/not a finite/);
    expect(() => clock.set(Number.POSITIVE_INFINITY)).toThrow(/not a finite/);
    expect(() => new FakeClock(Number.NaN)).toThrow(/not a finite/);
    expect(clock.now()).toBe(1_000);
  });
});

describe('SeededRng', () => {
  it('repeats its sequence for the same seed and differs for another', () => {
    const take = (rng: Rng): number[] => Array.from({ length: 20 }, () => rng.next());
    expect(take(new SeededRng(7))).toEqual(take(new SeededRng(7)));
    expect(take(new SeededRng(7))).not.toEqual(take(new SeededRng(8)));
  });

  it('stays in [0, 1) and spreads over the range', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const rng = new SeededRng(seed);
        for (let i = 0; i < 50; i++) {
          const x = rng.next();
          if (!(x >= 0 && x < 1)) return false;
        }
        return true;
      }),
    );
    const rng = new SeededRng(1);
    const buckets = new Array<number>(10).fill(0);
    for (let i = 0; i < 10_000; i++) buckets[Math.floor(rng.next() * 10)] += 1;
    for (const count of buckets) expect(count).toBeGreaterThan(850);
  });

  it('refuses a non-integer seed', () => {
    expect(() => new SeededRng(1.5)).toThrow(/not an integer/);
  });
});
