// The same rules, asserted alike on the in-memory limiter (a fake clock) and on the Redis one
// (the machine's Redis, a key prefix per test, a short window and lease so expiry is seen in real
// time), then what only Redis can show: exact limits across several routers' clients at once.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock, type Clock, type KeyLimits, type Scheduler } from '@llmgw/domain';
import { FakeClock, testRedisUrl } from '@llmgw/testing';
import Redis from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { AdmitResult, Limiter, Ticket } from './limiter.port';
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

describe('redis limiter: batches of permits taken ahead of use', () => {
  const BATCH_MS = 150;
  const make = (prefix: string, options: { windowMs?: number; clock?: Clock; timer?: Clock; scheduler?: Scheduler } = {}, redis = redisClient()) => {
    const limiter = new RedisLimiter({ redis, prefix, leaseMs: 30_000, clock: systemClock, batchMs: BATCH_MS, ...options });
    // Every admission that went to Redis (the limiter defined the script on this client).
    const asked = vi.spyOn(redis as unknown as { llmgwAdmit: (...args: unknown[]) => Promise<unknown> }, 'llmgwAdmit');
    return { limiter, redis, asked };
  };
  const key = (prefix: string, name: string, part: string): string => `${prefix}{${name}}:${part}`;

  it('spends a busy key’s batch without asking Redis, and Redis ends up holding exactly what was used', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    const { limiter, redis, asked } = make(prefix);
    const limits = { requestsPerMinute: 1_000_000, tokensPerMinute: 100_000_000, concurrentRequests: 10_000, tokensPerDay: 1_000_000_000 };
    const tickets: Ticket[] = [];
    for (let i = 0; i < 200; i++) {
      const r = await limiter.admit({ key: 'busy', limits, requestId: `b${i}`, reserveTokens: 50 });
      expect(r.admitted).toBe(true);
      tickets.push(r.ticket!);
    }
    // Batches grow with the key's pace up to 64: a handful of round trips for 200 admissions.
    expect(asked.mock.calls.length).toBeLessThan(15);
    expect(tickets.filter((t) => t.batch !== undefined).length).toBeGreaterThan(180);
    // In flight: every admission holds a slot (its own or its batch's); the batches' entries are all there.
    expect(await redis.zcard(key(prefix, 'busy', 'req'))).toBeGreaterThanOrEqual(200);
    for (const t of tickets) await limiter.settle(t, 30);
    await sleep(BATCH_MS + 100);
    // Every batch has ended: what it did not use went back, and each request counts what it used.
    expect(await redis.zcard(key(prefix, 'busy', 'req'))).toBe(200);
    expect(Number(await redis.get(key(prefix, 'busy', 'tokensum')))).toBe(200 * 30);
    expect(Number(await redis.get(key(prefix, 'busy', `day:${tickets[0].day}`)))).toBe(200 * 30);
    expect(await redis.zcard(key(prefix, 'busy', 'conc'))).toBe(0);
  });

  it('answers from a batch it holds at once (admitNow, no promise), and says nothing without one', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    const { limiter, redis, asked } = make(prefix);
    const limits = { requestsPerMinute: 1_000_000, tokensPerMinute: 100_000_000, concurrentRequests: 10_000 };
    const request = (i: number) => ({ key: 'now', limits, requestId: `n${i}`, reserveTokens: 20 });
    // A key not seen yet: nothing held, nothing taken, nothing counted.
    expect(limiter.admitNow(request(0))).toBeUndefined();
    for (let i = 1; i <= 3; i++) expect((await limiter.admit(request(i))).admitted).toBe(true);
    expect(asked.mock.calls.length).toBeGreaterThan(0);
    const askedBefore = asked.mock.calls.length;
    const now = limiter.admitNow(request(4));
    expect(now).toMatchObject({ admitted: true, ticket: { batch: expect.any(String) }, requests: { limit: 1_000_000 }, tokens: { limit: 100_000_000 } });
    expect(asked.mock.calls.length).toBe(askedBefore);
    // Settling a permit of an open batch needs no store either.
    expect(limiter.settle(now!.ticket!, 5)).toBeUndefined();
    await limiter.close();
    expect(await redis.zcard(key(prefix, 'now', 'conc'))).toBe(3);
  });

  it('dates a batch’s entries at its end, spends nothing of it after that, and gives back the rest', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    // The router's clocks and timers by hand (Redis keeps its own clock: the entries' dates are its).
    // Batches are timed on `clock` (monotonic time); `wall` only names the day.
    const clock = new FakeClock(1_000);
    const wall = new FakeClock(Date.now());
    const due: { at: number; fn: () => void }[] = [];
    const scheduler: Scheduler = {
      schedule: (delayMs, fn) => {
        due.push({ at: clock.now() + delayMs, fn });
        return () => undefined;
      },
    };
    const { limiter, redis, asked } = make(prefix, { clock: wall, timer: clock, scheduler });
    const limits = { requestsPerMinute: 1_000_000 };
    const results: AdmitResult[] = [];
    for (let i = 0; i < 3; i++) results.push(await limiter.admit({ key: 'k', limits, requestId: `d${i}`, reserveTokens: 0 }));
    // The second admission asked for the first batch (two within batchMs), of 4; the third spent one.
    expect(results[2].ticket?.batch).toBe('d1.batch');
    const scores = await redis.zrange(key(prefix, 'k', 'req'), 0, -1, 'WITHSCORES');
    const at = new Map<string, number>();
    for (let i = 0; i < scores.length; i += 2) at.set(scores[i], Number(scores[i + 1]));
    expect([...at.keys()].sort()).toEqual(['d0', 'd1', 'd1.batch#1', 'd1.batch#2', 'd1.batch#3', 'd1.batch#4']);
    for (let i = 1; i <= 4; i++) expect(at.get(`d1.batch#${i}`)).toBe(at.get('d1')! + BATCH_MS);
    const before = asked.mock.calls.length;
    // Its time is up on the router's monotonic clock: not spent, though its timer has not fired yet
    // and the wall clock has just stepped back ten seconds.
    clock.advance(BATCH_MS);
    wall.set(wall.now() - 10_000);
    const late = await limiter.admit({ key: 'k', limits, requestId: 'late', reserveTokens: 0 });
    expect(late.ticket?.batch).toBeUndefined();
    expect(asked.mock.calls.length).toBe(before + 1);
    // The three permits it never used are gone from the window (given back in the late admission's
    // write, ahead of it); the one it spent stays. The late admission, in a key as busy as ever,
    // took a batch of its own, whose timer is set for its end.
    expect(due.map((d) => d.at)).toEqual([clock.now(), clock.now() + BATCH_MS]);
    const left = await redis.zrange(key(prefix, 'k', 'req'), 0, -1);
    expect(left.filter((name) => !name.startsWith('late.batch#')).sort()).toEqual(['d0', 'd1', 'd1.batch#1', 'late']);
  });

  it('withdraws an admission whose answer came too late, and the batch it asked for, once Redis runs it', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    // The router's client: a command timeout well under Redis's stall, no retries.
    const fast = new Redis(testRedisUrl(), { maxRetriesPerRequest: 0, commandTimeout: 50 });
    clients.push(fast);
    const { limiter, redis } = make(prefix, {}, fast);
    const other = redisClient();
    const limits = { requestsPerMinute: 1_000_000, concurrentRequests: 10_000, tokensPerDay: 1_000_000_000 };
    const first = await limiter.admit({ key: 'k', limits, requestId: 'first', reserveTokens: 10 });
    expect(first.admitted).toBe(true);
    // Redis busy for 300 ms (one script at a time): the next admission, the key's second, asks for a batch and times out.
    const stall = other.eval(
      "local s = redis.call('TIME') local t0 = s[1] * 1000000 + s[2] repeat local n = redis.call('TIME') until n[1] * 1000000 + n[2] - t0 > 300000 return 1",
      0,
    );
    await sleep(20);
    await expect(limiter.admit({ key: 'k', limits, requestId: 'lost', reserveTokens: 10 })).rejects.toThrow(/timed out/i);
    await stall;
    await sleep(100);
    // It ran, batch and all, and was withdrawn: only the first admission is held.
    expect(await redis.zrange(key(prefix, 'k', 'req'), 0, -1)).toEqual(['first']);
    expect(await redis.zrange(key(prefix, 'k', 'conc'), 0, -1)).toEqual(['first']);
    expect(Number(await redis.get(key(prefix, 'k', `day:${first.ticket!.day}`)))).toBe(10);
  });

  it('gives back every unused permit at once when the router closes it', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    const { limiter, redis } = make(prefix);
    const limits = { requestsPerMinute: 1_000_000, concurrentRequests: 10_000 };
    const tickets: Ticket[] = [];
    for (let i = 0; i < 20; i++) tickets.push((await limiter.admit({ key: 'k', limits, requestId: `c${i}`, reserveTokens: 0 })).ticket!);
    await limiter.close();
    expect(await redis.zcard(key(prefix, 'k', 'req'))).toBe(20);
    // Closed: no more batches, though the key is as busy as before.
    const after = await Promise.all(Array.from({ length: 5 }, (_, i) => limiter.admit({ key: 'k', limits, requestId: `after${i}`, reserveTokens: 0 })));
    expect(after.map((r) => [r.admitted, r.ticket?.batch])).toEqual(Array.from({ length: 5 }, () => [true, undefined]));
    tickets.push(...after.map((r) => r.ticket!));
    expect(await redis.zcard(key(prefix, 'k', 'req'))).toBe(25);
    // Requests still in flight hold their slots, and give them back when they settle.
    expect(await redis.zcard(key(prefix, 'k', 'conc'))).toBe(25);
    for (const t of tickets) await limiter.settle(t, 0);
    await sleep(50);
    expect(await redis.zcard(key(prefix, 'k', 'conc'))).toBe(0);
  });

  it('admits exactly the limit when three routers hammer a key that batches, and leaves nothing held', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    // Long enough that nothing leaves the window while the test runs.
    const fleet = [0, 1, 2].map(() => make(prefix, { windowMs: 20_000 }));
    const LIMIT = 12_000;
    const limits = { requestsPerMinute: LIMIT };
    let admitted = 0;
    let batched = 0;
    let refused = false;
    let soonestRetry = Infinity;
    let lastAdmitted = Date.now();
    const deadline = Date.now() + 15_000;
    let n = 0;
    const wrongRefusals: AdmitResult[] = [];
    const worker = async (limiter: Limiter): Promise<void> => {
      // Until refusals have come and nothing was admitted for three batches' time: every batch has
      // ended, and what any gave back has been taken by the others.
      while ((!refused || Date.now() - lastAdmitted < 3 * BATCH_MS) && Date.now() < deadline) {
        const r = await limiter.admit({ key: 'hammered', limits, requestId: `h${++n}`, reserveTokens: 0, routers: 3 });
        if (r.admitted) {
          admitted++;
          lastAdmitted = Date.now();
          if (r.ticket?.batch !== undefined) batched++;
        } else {
          if (r.refusedBy !== 'requests') wrongRefusals.push(r);
          soonestRetry = Math.min(soonestRetry, r.retryAfterMs ?? 0);
          refused = true;
          await sleep(1);
        }
      }
    };
    await Promise.all(fleet.flatMap(({ limiter }) => [0, 1, 2, 3].map(() => worker(limiter))));
    await sleep(BATCH_MS + 50);
    const asked = fleet.reduce((sum, f) => sum + f.asked.mock.calls.length, 0);
    process.stdout.write(`[batches] limit ${LIMIT}: ${admitted} admitted, ${batched} from batches, ${asked} admissions asked of Redis\n`);
    expect(wrongRefusals).toEqual([]);
    // A refusal's retry is when the oldest entry leaves the window (20 s after the run began, which
    // took a few seconds at most), not when some batch ends.
    expect(soonestRetry).toBeGreaterThan(10_000);
    expect(admitted).toBe(LIMIT);
    expect(await fleet[0].redis.zcard(key(prefix, 'hammered', 'req'))).toBe(LIMIT);
    expect(batched).toBeGreaterThan(LIMIT / 2);
  });

  it('never holds more than a concurrency limit that batches across three routers, and leaks no slot', async () => {
    const prefix = `llmgw-test:${randomUUID()}:`;
    const fleet = [0, 1, 2].map(() => make(prefix));
    const LIMIT = 192;
    const limits = { concurrentRequests: LIMIT };
    let inFlight = 0;
    let most = 0;
    let refusals = 0;
    let batched = 0;
    let n = 0;
    const worker = async (limiter: Limiter, w: number): Promise<void> => {
      for (let i = 0; i < 30; i++) {
        const r = await limiter.admit({ key: 'busy', limits, requestId: `c${++n}`, reserveTokens: 0, routers: 3 });
        if (!r.admitted) {
          refusals++;
          await sleep(1);
          continue;
        }
        if (r.ticket?.batch !== undefined) batched++;
        inFlight++;
        most = Math.max(most, inFlight);
        await sleep((i + w) % 4);
        inFlight--;
        await limiter.settle(r.ticket!, 0);
      }
    };
    await Promise.all(Array.from({ length: 240 }, (_, w) => worker(fleet[w % 3].limiter, w)));
    await sleep(BATCH_MS + 50);
    process.stdout.write(`[batches] concurrency ${LIMIT}: most in flight ${most}, ${refusals} refused, ${batched} from batches\n`);
    expect(most).toBeLessThanOrEqual(LIMIT);
    expect(refusals).toBeGreaterThan(0);
    expect(batched).toBeGreaterThan(0);
    expect(await fleet[0].redis.zcard(key(prefix, 'busy', 'conc'))).toBe(0);
  });
});
