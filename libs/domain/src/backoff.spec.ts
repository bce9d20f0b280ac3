import { describe, expect, it } from 'vitest';
import { backoffDelay } from './backoff';

describe('backoffDelay', () => {
  const bounds = { minMs: 1_000, maxMs: 60_000 };

  it('waits the minimum first, doubles per attempt and stops at the maximum', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelay(n, bounds))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
  });

  it('counts an attempt below 1 (or a fraction) as the whole attempt below it, at least the first', () => {
    expect(backoffDelay(0, bounds)).toBe(1_000);
    expect(backoffDelay(-3, bounds)).toBe(1_000);
    expect(backoffDelay(2.9, bounds)).toBe(2_000);
  });

  it('never overflows, however many attempts', () => {
    expect(backoffDelay(10_000, bounds)).toBe(60_000);
    expect(backoffDelay(Number.MAX_SAFE_INTEGER, { minMs: 1, maxMs: 5 })).toBe(5);
  });
});
