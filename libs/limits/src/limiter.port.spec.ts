import { describe, expect, it } from 'vitest';
import { formatReset, hasLimits, msToNextUtcDay, rateLimitHeaders, shareOf, utcDay } from './limiter.port';

describe('limiter helpers', () => {
  it("writes reset durations the way OpenAI's headers do", () => {
    expect([0, 20, 999, 1_000, 1_001, 59_000, 60_000, 360_000, 3_723_000].map(formatReset)).toEqual(['0ms', '20ms', '999ms', '1s', '2s', '59s', '1m0s', '6m0s', '1h2m3s']);
  });

  it('gives the -requests and -tokens headers only for limits the key has, remaining never below 0', () => {
    expect(rateLimitHeaders({ admitted: true })).toEqual({});
    expect(rateLimitHeaders({ admitted: false, requests: { limit: 120, remaining: -3, resetMs: 1_500 }, tokens: { limit: 1000, remaining: 40, resetMs: 20 } })).toEqual({
      'x-ratelimit-limit-requests': '120',
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': '2s',
      'x-ratelimit-limit-tokens': '1000',
      'x-ratelimit-remaining-tokens': '40',
      'x-ratelimit-reset-tokens': '20ms',
    });
  });

  it('splits each limit over N routers, at least 1 each, and keeps absent ones absent', () => {
    expect(shareOf({ requestsPerMinute: 120, tokensPerMinute: 1000, concurrentRequests: 4, tokensPerDay: 10 }, 3)).toEqual({
      requestsPerMinute: 40,
      tokensPerMinute: 333,
      concurrentRequests: 1,
      tokensPerDay: 3,
    });
    expect(shareOf({ concurrentRequests: 2 }, 5)).toEqual({ concurrentRequests: 1 });
    expect(shareOf({ requestsPerMinute: 10 }, 0)).toEqual({ requestsPerMinute: 10 });
  });

  it('names the UTC day and the time to the next one', () => {
    const t = Date.UTC(2026, 11, 2, 23, 59, 59, 500);
    expect(utcDay(t)).toBe('2026-12-02');
    expect(msToNextUtcDay(t)).toBe(500);
  });

  it('names the right day on both sides of midnight, in any order (it keeps the last day it named)', () => {
    const midnight = Date.UTC(2026, 11, 3);
    expect(utcDay(midnight - 1)).toBe('2026-12-02');
    expect(utcDay(midnight)).toBe('2026-12-03');
    // A clock stepping back, and far away days, are named afresh.
    expect(utcDay(midnight - 1)).toBe('2026-12-02');
    expect(utcDay(midnight + 86_400_000 - 1)).toBe('2026-12-03');
    expect(utcDay(0)).toBe('1970-01-01');
    expect(utcDay(-1)).toBe('1969-12-31');
    expect(utcDay(Date.UTC(2028, 1, 29, 12))).toBe('2028-02-29');
    for (let ms = midnight - 3 * 3_600_000; ms < midnight + 3 * 3_600_000; ms += 997_003) expect(utcDay(ms)).toBe(new Date(ms).toISOString().slice(0, 10));
  });

  it('knows a key without limits', () => {
    expect(hasLimits({})).toBe(false);
    expect(hasLimits({ tokensPerDay: 1 })).toBe(true);
  });
});
