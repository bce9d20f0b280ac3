import { describe, expect, it } from 'vitest';
import type { Candidate } from './candidate';
import { admit, isSaturated, retryAfterSeconds, validateThresholds } from './admission';

const t = { maxWaiting: 4, maxKvUsage: 0.9, maxInFlight: 8 };
const cand = (over: Partial<Candidate>): Candidate => ({
  id: 'a',
  models: ['m'],
  suspect: false,
  draining: false,
  breaker: 'closed',
  probeAvailable: false,
  inFlight: 0,
  ...over,
});

describe('admission', () => {
  it.each([
    ['idle with no metrics', cand({}), false],
    ['local in-flight at the bound', cand({ inFlight: 8 }), true],
    ['engine queue at the bound', cand({ load: { waiting: 4 } }), true],
    ['KV nearly full', cand({ load: { kvUsage: 0.95 } }), true],
    ['unknown engine metrics below the local bound', cand({ inFlight: 7, load: {} }), false],
  ])('%s → saturated=%s', (_n, c, want) => {
    expect(isSaturated(c, t)).toBe(want);
  });

  it('routes among unsaturated endpoints only', () => {
    const free = cand({ id: 'free' });
    const d = admit([cand({ id: 'full', inFlight: 8 }), free], t, 0, 10);
    expect(d).toEqual({ action: 'route', candidates: [free] });
  });

  it('queues while below the bound, then answers 429; no endpoint at all is 503', () => {
    const full = [cand({ inFlight: 8 })];
    expect(admit(full, t, 9, 10)).toEqual({ action: 'queue' });
    expect(admit(full, t, 10, 10)).toEqual({ action: 'reject', status: 429, reason: 'queue-full' });
    expect(admit([], t, 0, 10)).toEqual({ action: 'reject', status: 503, reason: 'no-endpoints' });
  });

  it('estimates Retry-After from the drain rate, and assumes the worst when it is unknown', () => {
    expect(retryAfterSeconds(9, 5)).toBe(2);
    expect(retryAfterSeconds(0, 100)).toBe(1);
    expect(retryAfterSeconds(1000, 1)).toBe(60);
    expect(retryAfterSeconds(3, undefined)).toBe(60);
    expect(retryAfterSeconds(3, 0)).toBe(60);
  });

  it('lists every bad threshold', () => {
    expect(() => validateThresholds({ maxWaiting: 0, maxKvUsage: 1.5, maxInFlight: 2.5 })).toThrowError(
      expect.objectContaining({
        problems: [
          expect.objectContaining({ path: 'admission.maxWaiting' }),
          expect.objectContaining({ path: 'admission.maxKvUsage' }),
          expect.objectContaining({ path: 'admission.maxInFlight' }),
        ],
      }),
    );
    expect(validateThresholds(t)).toBe(t);
  });
});
