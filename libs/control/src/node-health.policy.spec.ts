import { describe, expect, it } from 'vitest';
import { healthAt } from './node-health.policy';

const windows = { unreachableAfterMs: 15_000, lostAfterMs: 60_000 };

describe('healthAt', () => {
  it.each([
    [0, 'healthy'],
    [14_999, 'healthy'],
    [15_000, 'healthy'],
    [15_001, 'unreachable'],
    [60_000, 'unreachable'],
    [60_001, 'lost'],
    [3_600_000, 'lost'],
  ] as const)('silent for %i ms → %s', (silent, state) => {
    expect(healthAt(1_000_000, 1_000_000 + silent, windows)).toBe(state);
  });
});
