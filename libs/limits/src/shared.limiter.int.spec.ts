// What a router does when the shared store goes away: its share of each limit, decided alone,
// and back to exact limits when the store answers again. Fakes for the store's moods, then a
// real redis-server killed under the limiter.
import { FakeClock, startRedis } from '@llmgw/testing';
import Redis from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { AdmitRequest, AdmitResult, Limiter, Ticket } from './limiter.port';
import { MemoryLimiter } from './memory.limiter';
import { RedisLimiter } from './redis.limiter';
import { SharedLimiter } from './shared.limiter';

class FlakyStore implements Limiter {
  down = false;
  admits = 0;
  async admit(request: AdmitRequest): Promise<AdmitResult> {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    this.admits++;
    return { admitted: true, ticket: { key: request.key, requestId: request.requestId, limits: request.limits, reserved: request.reserveTokens, day: 'd', via: 'redis' } };
  }
  async settle(): Promise<void> {
    if (this.down) throw new Error('down');
  }
  async renew(): Promise<void> {}
}

let n = 0;
const ask = (limiter: Limiter, requestsPerMinute: number) => limiter.admit({ key: 'k', limits: { requestsPerMinute }, requestId: `q${++n}`, reserveTokens: 0 });

describe('shared limiter', () => {
  it('is exact on its own when no shared store is configured', async () => {
    const clock = new FakeClock();
    const limiter = new SharedLimiter({ local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000 });
    const results = await Promise.all(Array.from({ length: 15 }, () => ask(limiter, 12)));
    expect(results.filter((r) => r.admitted)).toHaveLength(12);
    expect(limiter.degraded).toBe(false);
  });

  it('enforces limit ÷ N while the store fails, says so once, retries it every retryMs, and goes back when it answers', async () => {
    const clock = new FakeClock();
    const store = new FlakyStore();
    const changes: boolean[] = [];
    const limiter = new SharedLimiter({ shared: store, local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000, onChange: (d) => changes.push(d) });
    expect((await ask(limiter, 120)).ticket?.via).toBe('redis');
    store.down = true;
    const during = await Promise.all(Array.from({ length: 60 }, () => ask(limiter, 120)));
    expect(during.filter((r) => r.admitted)).toHaveLength(40);
    expect(during.filter((r) => r.admitted).every((r) => r.ticket?.via === 'memory')).toBe(true);
    expect(limiter.degraded).toBe(true);
    expect(changes).toEqual([true]);
    store.down = false;
    clock.advance(500);
    expect((await ask(limiter, 120)).ticket).toBeUndefined(); // still local, and its share is used up
    expect(store.admits).toBe(1);
    clock.advance(500);
    expect((await ask(limiter, 120)).ticket?.via).toBe('redis');
    expect(limiter.degraded).toBe(false);
    expect(changes).toEqual([true, false]);
  });

  it('decides at once where it can: its own limiter alone, the store’s held permits while healthy, never while degraded', () => {
    const clock = new FakeClock();
    const request = { key: 'k', limits: { requestsPerMinute: 2 }, requestId: 'now', reserveTokens: 0 };
    const alone = new SharedLimiter({ local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000 });
    expect(alone.admitNow({ ...request, requestId: 'a' })).toMatchObject({ admitted: true, ticket: { via: 'memory' } });
    expect(alone.admitNow({ ...request, requestId: 'b' })).toMatchObject({ admitted: true });
    expect(alone.admitNow({ ...request, requestId: 'c' })).toMatchObject({ admitted: false, refusedBy: 'requests' });
    const store = new FlakyStore();
    const held: AdmitResult = { admitted: true, ticket: { key: 'k', requestId: 'held', limits: request.limits, reserved: 0, day: 'd', via: 'redis', batch: 'b1' } };
    const withHeld = Object.assign(store, { admitNow: () => held });
    const shared = new SharedLimiter({ shared: withHeld, local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000 });
    expect(shared.admitNow(request)).toBe(held);
    // Without a store to spend from (no admitNow), admit() decides.
    expect(new SharedLimiter({ shared: new FlakyStore(), local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000 }).admitNow(request)).toBeUndefined();
  });

  it('leaves the decision to admit() while degraded, so the store is retried on time', async () => {
    const clock = new FakeClock();
    const store = Object.assign(new FlakyStore(), { admitNow: (): AdmitResult | undefined => undefined });
    const limiter = new SharedLimiter({ shared: store, local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000 });
    store.down = true;
    expect((await ask(limiter, 120)).ticket?.via).toBe('memory');
    expect(limiter.degraded).toBe(true);
    store.admitNow = () => {
      throw new Error('a degraded limiter must not ask the store');
    };
    expect(limiter.admitNow({ key: 'k', limits: { requestsPerMinute: 120 }, requestId: 'x', reserveTokens: 0 })).toBeUndefined();
  });

  it('takes a store that refuses a settle at once, or later, as a failed store: no throw', async () => {
    const clock = new FakeClock();
    const store = new FlakyStore();
    const changes: boolean[] = [];
    const limiter = new SharedLimiter({ shared: store, local: new MemoryLimiter({ clock, leaseMs: 1_000 }), routers: () => 3, clock, retryMs: 1_000, onChange: (d) => changes.push(d) });
    const ticket = (await ask(limiter, 120)).ticket as Ticket;
    store.settle = () => {
      throw new Error('connection is closed');
    };
    expect(() => limiter.settle(ticket, 0)).not.toThrow();
    expect(limiter.degraded).toBe(true);
    expect(changes).toEqual([true]);
  });

  it('settles a ticket where it was admitted', async () => {
    const clock = new FakeClock();
    const store = new FlakyStore();
    const local = new MemoryLimiter({ clock, leaseMs: 60_000 });
    const limiter = new SharedLimiter({ shared: store, local, routers: () => 1, clock, retryMs: 1_000 });
    store.down = true;
    const held = await limiter.admit({ key: 'k', limits: { concurrentRequests: 1 }, requestId: 'one', reserveTokens: 0 });
    expect(held.ticket?.via).toBe('memory');
    await limiter.settle(held.ticket as Ticket, 0);
    expect((await local.admit({ key: 'k', limits: { concurrentRequests: 1 }, requestId: 'two', reserveTokens: 0 })).admitted).toBe(true);
  });

  it('keeps admitting its share, never all and never none, when a real Redis is killed', async () => {
    const server = await startRedis();
    const redis = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 200, retryStrategy: () => 200 });
    redis.on('error', () => undefined);
    try {
      await new Promise<void>((resolve) => (redis.status === 'ready' ? resolve() : redis.once('ready', () => resolve())));
      const clock = new FakeClock(Date.now());
      const changes: boolean[] = [];
      const limiter = new SharedLimiter({
        shared: new RedisLimiter({ redis, prefix: 'llmgw-test:', leaseMs: 10_000, clock }),
        local: new MemoryLimiter({ clock, leaseMs: 10_000 }),
        routers: () => 3,
        clock,
        retryMs: 1_000,
        onChange: (d) => changes.push(d),
      });
      const before = await Promise.all(Array.from({ length: 10 }, () => ask(limiter, 30)));
      expect(before.filter((r) => r.admitted)).toHaveLength(10);
      await server.kill9();
      const after = await Promise.all(Array.from({ length: 30 }, () => ask(limiter, 30)));
      expect(after.filter((r) => r.admitted)).toHaveLength(10);
      expect(limiter.degraded).toBe(true);
      expect(changes).toEqual([true]);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
