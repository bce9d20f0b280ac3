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

  it('counts a lapsed concurrency claim nowhere, and renewal does not bring it back', async () => {
    const clock = new FakeClock(0);
    const limiter = new MemoryLimiter({ clock, leaseMs: 1_000 });
    const limits = { concurrentRequests: 2 };
    const ask = (id: string) => limiter.admit({ key: 'k', limits, requestId: id, reserveTokens: 0 });
    const lapsing = await ask('lapsing');
    const live = await ask('live');
    expect((await ask('third')).admitted).toBe(false);
    clock.advance(600);
    await limiter.renew([live.ticket!]);
    clock.advance(600);
    // 'lapsing' went unrenewed past its lease: its slot is free; a late renewal does not take it back.
    await limiter.renew([lapsing.ticket!, live.ticket!]);
    expect((await ask('fourth')).admitted).toBe(true);
    expect((await ask('fifth')).admitted).toBe(false);
  });
});
