import { describe, expect, it } from 'vitest';
import { CircuitBreaker, type BreakerTransition } from './circuit-breaker';
import { DrainRate } from './drain-rate';

const clock = () => {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

describe('CircuitBreaker', () => {
  it('opens after consecutive failures, probes once after the cooldown, closes on success', () => {
    const c = clock();
    const seen: BreakerTransition[] = [];
    const b = new CircuitBreaker(c, { failureThreshold: 3, cooldownMs: 5_000 }, (t) => seen.push(t));
    b.onFailure();
    b.onFailure();
    b.onSuccess(); // resets the count: failures must be consecutive
    b.onFailure();
    b.onFailure();
    expect(b.state).toBe('closed');
    b.onFailure();
    expect(b.state).toBe('open');
    expect(b.available).toBe(false);
    c.advance(4_999);
    expect(b.state).toBe('open');
    c.advance(1);
    expect(b.state).toBe('half-open');
    expect(b.available).toBe(true);
    b.onAcquire();
    expect(b.available).toBe(false); // exactly one probe
    b.onSuccess();
    expect(b.state).toBe('closed');
    expect(seen).toEqual([
      { from: 'closed', to: 'open' },
      { from: 'open', to: 'half-open' },
      { from: 'half-open', to: 'closed' },
    ]);
  });

  it('a failed probe opens it for another full cooldown', () => {
    const c = clock();
    const b = new CircuitBreaker(c, { failureThreshold: 1, cooldownMs: 1_000 });
    b.onFailure();
    c.advance(1_000);
    b.onAcquire();
    b.onFailure();
    expect(b.state).toBe('open');
    c.advance(999);
    expect(b.state).toBe('open');
    c.advance(1);
    expect(b.state).toBe('half-open');
  });

  it('an abandoned probe frees the slot', () => {
    const c = clock();
    const b = new CircuitBreaker(c, { failureThreshold: 1, cooldownMs: 10 });
    b.onFailure();
    c.advance(10);
    b.onAcquire();
    b.onAbandon();
    expect(b.available).toBe(true);
  });
});

describe('DrainRate', () => {
  it('is unknown before anything was observed, then tracks completions per second', () => {
    const c = clock();
    const d = new DrainRate(c, 1_000, 100);
    expect(d.rate()).toBeUndefined();
    for (let s = 0; s < 50; s++) {
      for (let i = 0; i < 10; i++) d.record();
      c.advance(100); // 100 completions/s
    }
    expect(d.rate()).toBeCloseTo(100, 0);
    c.advance(10_000); // nothing completes for 10 s
    expect(d.rate()!).toBeLessThan(1);
  });
});
