import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatBytes, formatDuration, formatTime, renderTable, usageBar, visibleWidth } from './text.format';

describe('usageBar', () => {
  it.each([
    [{ used: 2, unhealthy: 0, unavailable: 0, free: 6 }, '[#####...............]'],
    [{ used: 15, unhealthy: 1, unavailable: 3, free: 5 }, '[#############!~~....]'],
    [{ used: 999, unhealthy: 1, unavailable: 0, free: 0 }, '[###################!]'],
    [{ used: 0, unhealthy: 0, unavailable: 0, free: 0 }, '[                    ]'],
  ])('%j → %s', (c, bar) => expect(usageBar(c)).toBe(bar));

  it('always fills the width exactly and shows every non-zero part', () => {
    const count = fc.nat({ max: 10_000 });
    fc.assert(
      fc.property(count, count, count, count, fc.integer({ min: 4, max: 60 }), (used, unhealthy, unavailable, free, width) => {
        const bar = usageBar({ used, unhealthy, unavailable, free }, width);
        expect(bar.length).toBe(width + 2);
        const inner = bar.slice(1, -1);
        expect(inner.includes('#')).toBe(used > 0);
        expect(inner.includes('!')).toBe(unhealthy > 0);
        expect(inner.includes('~')).toBe(unavailable > 0);
        expect(inner.includes('.')).toBe(free > 0);
      }),
      { seed: 4242, numRuns: 500 },
    );
  });
});

describe('formatting', () => {
  it.each([
    [0, '0s'],
    [59.9, '59s'],
    [60, '1m'],
    [3_599, '59m'],
    [3_600, '1h'],
    [11_520, '3h12m'],
    [172_800, '2d'],
    [274_000, '3d4h'],
    [-5, '0s'],
  ])('duration %d s → %s', (s, text) => expect(formatDuration(s)).toBe(text));

  it('prints unknown as - and sizes in decimal units', () => {
    expect(formatBytes(undefined)).toBe('-');
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(16_100_000_000)).toBe('16.1 GB');
    expect(formatTime(undefined)).toBe('-');
    expect(formatTime(Date.UTC(2026, 8, 17, 0, 52, 34, 123))).toBe('2026-09-17T00:52:34Z');
  });

  it('aligns table columns by visible width, ignoring colour codes', () => {
    expect(renderTable(['A', 'NUM', 'LAST'], [['\x1b[32mok\x1b[0m', '5', 'x'], ['long', '12', '']], [1])).toBe('A     NUM  LAST\n\x1b[32mok\x1b[0m      5  x\nlong   12\n');
    expect(visibleWidth('\x1b[31mred\x1b[0m')).toBe(3);
  });
});
