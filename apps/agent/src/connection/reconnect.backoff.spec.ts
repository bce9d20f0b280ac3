import fc from 'fast-check';
import { SeededRng } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { reconnectDelay } from './reconnect.backoff';

describe('reconnectDelay', () => {
  it('stays within [half, all] of an exponential step capped at the maximum', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 0, max: 120_000 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (failures, minMs, extra, r) => {
        const bounds = { minMs, maxMs: minMs + extra };
        const step = Math.min(bounds.maxMs, minMs * 2 ** (failures - 1));
        const delay = reconnectDelay(failures, bounds, { next: () => r });
        expect(delay).toBeGreaterThanOrEqual(Math.floor(step / 2));
        expect(delay).toBeLessThanOrEqual(Math.ceil(step));
        expect(delay).toBeLessThanOrEqual(bounds.maxMs);
      }),
    );
  });

  it('doubles per failure until the cap, and spreads a fleet apart', () => {
    const bounds = { minMs: 500, maxMs: 30_000 };
    const top = { next: () => 0.999999 };
    expect([1, 2, 3, 4, 7, 8, 20].map((f) => reconnectDelay(f, bounds, top))).toEqual([500, 1000, 2000, 4000, 30_000, 30_000, 30_000]);
    const rng = new SeededRng(7);
    const fleet = Array.from({ length: 50 }, () => reconnectDelay(5, bounds, rng));
    expect(new Set(fleet).size).toBeGreaterThan(40);
  });
});
