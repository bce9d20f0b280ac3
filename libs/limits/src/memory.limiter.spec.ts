// The in-memory windows against a naive model, over enough admissions that the windows drop
// thousands of entries from their front (and compact) while staying exact.
import { FakeClock } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { MemoryLimiter } from './memory.limiter';

describe('MemoryLimiter windows', () => {
  it('admit exactly what a sliding window allows over 6,000 admissions, with the headers to match', async () => {
    const clock = new FakeClock(0);
    const WINDOW = 1_200;
    const limiter = new MemoryLimiter({ clock, leaseMs: 60_000, windowMs: WINDOW });
    const limits = { requestsPerMinute: 1_000, tokensPerMinute: 9_000 };
    const admittedAt: { at: number; tokens: number }[] = [];
    for (let i = 0; i < 6_000; i++) {
      // Two tries a ms, except a quiet stretch that lets much of the window go at once.
      clock.set(Math.floor(i / 2) + (i >= 3_000 ? 2_000 : 0));
      const now = clock.now();
      const tokens = 1 + (i % 13);
      const inWindow = admittedAt.filter((a) => a.at > now - WINDOW);
      const want = inWindow.length < 1_000 && inWindow.reduce((n, a) => n + a.tokens, 0) + tokens <= 9_000;
      const r = await limiter.admit({ key: 'k', limits, requestId: `r${i}`, reserveTokens: tokens });
      expect(r.admitted, `admission ${i} at ${now} ms`).toBe(want);
      if (want) admittedAt.push({ at: now, tokens });
      const held = admittedAt.filter((a) => a.at > now - WINDOW);
      expect(r.requests?.remaining).toBe(1_000 - held.length);
      expect(r.tokens?.remaining).toBe(9_000 - held.reduce((n, a) => n + a.tokens, 0));
    }
    expect(admittedAt.length).toBeGreaterThan(3_000);
  });

  it('frees a lapsed concurrency claim once the limit is reached; a late renewal before that keeps it, as Redis does', async () => {
    const clock = new FakeClock(0);
    const limiter = new MemoryLimiter({ clock, leaseMs: 1_000 });
    const limits = { concurrentRequests: 1 };
    const ask = (id: string) => limiter.admit({ key: 'k', limits, requestId: id, reserveTokens: 0 });
    const a = await ask('a');
    clock.advance(1_100);
    // Past its lease but not dropped yet: renewed late, the request still holds its slot.
    await limiter.renew([a.ticket!]);
    clock.advance(100);
    expect((await ask('b')).admitted).toBe(false);
    // Unrenewed past the lease again: the next admission at the limit drops it and takes the slot.
    clock.advance(1_000);
    const c = await ask('c');
    expect(c.admitted).toBe(true);
    // Dropped claims stay dropped: renewing 'a' now takes nothing back.
    await limiter.renew([a.ticket!]);
    await limiter.settle(c.ticket!, 0);
    expect((await ask('d')).admitted).toBe(true);
  });
});
