// The same rules, asserted alike on the in-memory limiter (a fake clock) and on the Redis one
// (the machine's Redis, a key prefix per test, a short window and lease so expiry is seen in real
// time), then what only Redis can show: exact limits across several routers' clients at once.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KeyLimits } from '@llmgw/domain';
import { FakeClock, testRedisUrl } from '@llmgw/testing';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import type { AdmitResult, Limiter } from './limiter.port';
import { MemoryLimiter } from './memory.limiter';
import { RedisLimiter } from './redis.limiter';

const WINDOW_MS = 1_200;
const LEASE_MS = 600;
const clients: Redis[] = [];

afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => undefined)));
});

function redisClient(): Redis {
  const c = new Redis(testRedisUrl(), { enableOfflineQueue: true, maxRetriesPerRequest: 1, commandTimeout: 2_000 });
  clients.push(c);
  return c;
}

interface Backend {
  readonly name: string;
  make(): { limiter: Limiter; wait(ms: number): Promise<void>; clock: FakeClock };
}

const backends: Backend[] = [
  {
    name: 'memory',
    make: () => {
      const clock = new FakeClock();
      return { limiter: new MemoryLimiter({ clock, leaseMs: LEASE_MS, windowMs: WINDOW_MS }), wait: async (ms) => void clock.advance(ms), clock };
    },
  },
  {
    name: 'redis',
    make: () => {
      const clock = new FakeClock(Date.now());
      const limiter = new RedisLimiter({ redis: redisClient(), prefix: `llmgw-test:${randomUUID()}:`, leaseMs: LEASE_MS, clock, windowMs: WINDOW_MS });
      return { limiter, wait: (ms) => sleep(ms), clock };
    },
  },
];

let seq = 0;
const admit = (limiter: Limiter, limits: KeyLimits, reserveTokens = 0, key = 'team-a'): Promise<AdmitResult> =>
  limiter.admit({ key, limits, reserveTokens, requestId: `r${++seq}` });

describe.each(backends)('$name limiter', (backend) => {
  it('admits exactly requestsPerMinute in a window, says when the next frees up, and admits again after', async () => {
    const { limiter, wait } = backend.make();
    const limits = { requestsPerMinute: 5 };
    const results: AdmitResult[] = [];
    for (let i = 0; i < 8; i++) results.push(await admit(limiter, limits));
    expect(results.map((r) => r.admitted)).toEqual([true, true, true, true, true, false, false, false]);
    expect(results.map((r) => r.requests?.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0]);
    const refused = results[5];
    expect(refused).toMatchObject({ refusedBy: 'requests', requests: { limit: 5 } });
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(WINDOW_MS);
    expect(refused.ticket).toBeUndefined();
    await wait(WINDOW_MS + 50);
    expect((await admit(limiter, limits)).admitted).toBe(true);
  });

  it('holds nothing for a refused request: a refusal by one limit uses up no other', async () => {
    const { limiter } = backend.make();
    const limits = { requestsPerMinute: 10, concurrentRequests: 1 };
    const first = await admit(limiter, limits);
    expect(first.admitted).toBe(true);
    for (let i = 0; i < 4; i++) expect(await admit(limiter, limits)).toMatchObject({ admitted: false, refusedBy: 'concurrency' });
    await limiter.settle(first.ticket!, 0);
    expect(await admit(limiter, limits)).toMatchObject({ admitted: true, requests: { remaining: 8 } });
  });

  it('reserves tokens at admission and settles them to what the request used', async () => {
    const { limiter } = backend.make();
    const limits = { tokensPerMinute: 100 };
    const a = await admit(limiter, limits, 40);
    const b = await admit(limiter, limits, 40);
    expect([a.admitted, b.admitted]).toEqual([true, true]);
    expect(b.tokens).toMatchObject({ limit: 100, remaining: 20 });
    expect(await admit(limiter, limits, 40)).toMatchObject({ admitted: false, refusedBy: 'tokens', tokens: { remaining: 20 } });
    await limiter.settle(a.ticket!, 10);
    expect(await admit(limiter, limits, 40)).toMatchObject({ admitted: true, tokens: { remaining: 10 } });
    // A request that used more than it reserved counts for what it used.
    await limiter.settle(b.ticket!, 75);
    expect(await admit(limiter, limits, 1)).toMatchObject({ admitted: false, refusedBy: 'tokens' });
  });

  it('lets tokens go with the window at the amounts they were settled to', async () => {
    const { limiter, wait } = backend.make();
    const limits = { tokensPerMinute: 100 };
    const a = await admit(limiter, limits, 60);
    await limiter.settle(a.ticket!, 25);
    const b = await admit(limiter, limits, 30);
    await limiter.settle(b.ticket!, 30);
    expect(await admit(limiter, limits, 50)).toMatchObject({ admitted: false, refusedBy: 'tokens', tokens: { remaining: 45 } });
    await wait(WINDOW_MS + 50);
    // Both left the window: everything is free again, and the sum is exact (not 60 + 30 − what was given back).
    expect(await admit(limiter, limits, 100)).toMatchObject({ admitted: true, tokens: { remaining: 0 } });
  });

  it('holds at most concurrentRequests in flight, and frees a slot when one settles', async () => {
    const { limiter } = backend.make();
    const limits = { concurrentRequests: 2 };
    const a = await admit(limiter, limits);
    await admit(limiter, limits);
    expect(await admit(limiter, limits)).toMatchObject({ admitted: false, refusedBy: 'concurrency', retryAfterMs: 1_000 });
    await limiter.settle(a.ticket!, 0);
    expect((await admit(limiter, limits)).admitted).toBe(true);
  });

  it('applies a settle before an admission asked for after it, though nobody awaited the settle', async () => {
    const { limiter } = backend.make();
    const limits = { concurrentRequests: 1, tokensPerMinute: 100 };
    const first = await admit(limiter, limits, 80);
    const settled = limiter.settle(first.ticket!, 30);
    // Same turn: the settle is still queued when the admission is asked for.
    const second = admit(limiter, limits, 70);
    expect(await second).toMatchObject({ admitted: true, tokens: { remaining: 0 } });
    await settled;
    expect(await admit(limiter, limits, 1)).toMatchObject({ admitted: false, refusedBy: 'tokens' });
  });

  it('lets a claim that is never settled (its router died) lapse after the lease, and renewal keeps a live one', async () => {
    const { limiter, wait } = backend.make();
    const limits = { concurrentRequests: 1 };
    const live = await admit(limiter, limits, 0, 'renewed');
    await admit(limiter, limits, 0, 'abandoned');
    await wait(LEASE_MS / 2);
    await limiter.renew([live.ticket!]);
    await wait(LEASE_MS / 2 + 100);
    expect(await admit(limiter, limits, 0, 'abandoned')).toMatchObject({ admitted: true });
    expect(await admit(limiter, limits, 0, 'renewed')).toMatchObject({ admitted: false, refusedBy: 'concurrency' });
  });

  it('keeps a daily token budget, refused until the next UTC day, settled to real usage', async () => {
    const { limiter, clock } = backend.make();
    const limits = { tokensPerDay: 100 };
    const a = await admit(limiter, limits, 60);
    expect(a.admitted).toBe(true);
    const refused = await admit(limiter, limits, 60);
    expect(refused).toMatchObject({ admitted: false, refusedBy: 'daily-tokens' });
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(86_400_000);
    expect(a.ticket!.day).toBe(new Date(clock.now()).toISOString().slice(0, 10));
    await limiter.settle(a.ticket!, 20);
    expect((await admit(limiter, limits, 60)).admitted).toBe(true);
  });

  it('admits a key without limits and reports no rate', async () => {
    const { limiter } = backend.make();
    const r = await admit(limiter, {});
    expect(r.admitted).toBe(true);
    expect(r.requests).toBeUndefined();
    expect(r.tokens).toBeUndefined();
  });
});

describe('redis limiter across routers', () => {
  const routers = (prefix: string) =>
    [0, 1, 2].map(() => new RedisLimiter({ redis: redisClient(), prefix, leaseMs: 30_000, clock: new FakeClock(Date.now()) }));

  it('admits exactly the limit when three routers take 400 requests at once', async () => {
    const fleet = routers(`llmgw-test:${randomUUID()}:`);
    const limits = { requestsPerMinute: 120 };
    const results = await Promise.all(Array.from({ length: 400 }, (_, i) => fleet[i % 3].admit({ key: 'hammered', limits, requestId: `h${i}`, reserveTokens: 0 })));
    expect(results.filter((r) => r.admitted)).toHaveLength(120);
    expect(results.filter((r) => !r.admitted).every((r) => r.refusedBy === 'requests')).toBe(true);
  });

  it('never holds more than the concurrency limit across three routers under churn', async () => {
    const fleet = routers(`llmgw-test:${randomUUID()}:`);
    const limits = { concurrentRequests: 4 };
    let inFlight = 0;
    let most = 0;
    let refusals = 0;
    let n = 0;
    const worker = async (limiter: Limiter): Promise<void> => {
      for (let i = 0; i < 40; i++) {
        const r = await limiter.admit({ key: 'busy', limits, requestId: `c${++n}`, reserveTokens: 0 });
        if (!r.admitted) {
          refusals++;
          continue;
        }
        inFlight++;
        most = Math.max(most, inFlight);
        await sleep(i % 5);
        inFlight--;
        await limiter.settle(r.ticket!, 0);
      }
    };
    await Promise.all(Array.from({ length: 9 }, (_, i) => worker(fleet[i % 3])));
    expect(most).toBe(4);
    expect(refusals).toBeGreaterThan(0);
  });
});
