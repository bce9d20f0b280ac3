import { DomainError, ErrorCode, type Clock, type Rng, type Scheduler } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { AlwaysLeader } from './always-leader.elector';
import { LeaderElector, randomOwnerId, type LeaderElectorOptions } from './leader.elector';
import type { LeadershipEnd, LeadershipTerm } from './leadership.port';
import { NO_FENCE, type LeaseRecord, type LeaseStore } from './lease-store.port';

// The elector against an in-memory store with the SQL statement's semantics; the same cases run
// against SQLite and PostgreSQL in libs/store (lease.repository.int.spec.ts).

class ManualClock implements Clock {
  constructor(public t = 1_000_000) {}
  now(): number {
    return this.t;
  }
}

/** Runs scheduled callbacks when the test moves the clock past their due time. */
class ManualScheduler implements Scheduler {
  private tasks: { due: number; seq: number; fn: () => void }[] = [];
  private seq = 0;
  constructor(private readonly clock: ManualClock) {}
  schedule(delayMs: number, fn: () => void): () => void {
    const task = { due: this.clock.t + Math.max(0, delayMs), seq: this.seq++, fn };
    this.tasks.push(task);
    return () => {
      this.tasks = this.tasks.filter((t) => t !== task);
    };
  }
  /** Moves the clock to `until` one due task at a time, letting promises settle after each. */
  async runUntil(until: number): Promise<void> {
    await settle();
    for (;;) {
      this.tasks.sort((a, b) => a.due - b.due || a.seq - b.seq);
      const next = this.tasks[0];
      if (next === undefined || next.due > until) break;
      this.tasks.shift();
      this.clock.t = Math.max(this.clock.t, next.due);
      next.fn();
      await settle();
    }
    this.clock.t = Math.max(this.clock.t, until);
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** The store statement's semantics in memory, with switches for outages and hangs. */
class MemoryLeaseStore implements LeaseStore {
  rows = new Map<string, LeaseRecord>();
  failing = false;
  hang: Promise<void> | undefined;
  claims = 0;
  async claim(name: string, owner: string, now: number, ttlMs: number): Promise<LeaseRecord | undefined> {
    this.claims++;
    if (this.hang) await this.hang;
    if (this.failing) throw new Error('store unreachable');
    const row = this.rows.get(name);
    if (row && row.owner !== owner && row.expiresAt > now) return undefined;
    const next: LeaseRecord =
      row === undefined
        ? { name, owner, generation: 1, expiresAt: now + ttlMs, acquiredAt: now }
        : row.owner === owner
          ? { ...row, expiresAt: now + ttlMs }
          : { name, owner, generation: row.generation + 1, expiresAt: now + ttlMs, acquiredAt: now };
    this.rows.set(name, next);
    return next;
  }
  async release(name: string, owner: string): Promise<void> {
    if (this.failing) throw new Error('store unreachable');
    const row = this.rows.get(name);
    if (row?.owner === owner) this.rows.set(name, { ...row, expiresAt: 0 });
  }
}

function seq(...values: number[]): Rng {
  let i = 0;
  return { next: () => values[i++ % values.length] };
}

const TTL = 1_000;
const RENEW = 200;
const SKEW = 100;

function setup(store = new MemoryLeaseStore(), clock = new ManualClock(), rngSeed = 0.1) {
  const scheduler = new ManualScheduler(clock);
  const log: string[] = [];
  const terms: LeadershipTerm[] = [];
  const ends: LeadershipEnd[] = [];
  const errors: unknown[] = [];
  const make = (seed: number, extra: Partial<LeaderElectorOptions> = {}) =>
    new LeaderElector({
      store,
      clock,
      scheduler,
      rng: seq(seed, seed / 2, seed / 3, seed / 5),
      ttlMs: TTL,
      renewIntervalMs: RENEW,
      maxClockSkewMs: SKEW,
      onStartedLeading: (t) => {
        terms.push(t);
        log.push(`start ${t.ownerId.slice(0, 4)} g${t.generation} @${t.startedAt - 1_000_000}`);
      },
      onStoppedLeading: (e) => {
        ends.push(e);
        log.push(`stop ${e.ownerId.slice(0, 4)} ${e.reason} @${e.at - 1_000_000}`);
      },
      onError: (e) => errors.push(e),
      ...extra,
    });
  return { store, clock, scheduler, log, terms, ends, errors, elector: make(rngSeed), make };
}

describe('LeaderElector settings', () => {
  it.each([
    [{ ttlMs: 0 }, 'ttlMs'],
    [{ ttlMs: 1.5 }, 'ttlMs'],
    [{ renewIntervalMs: -1 }, 'renewIntervalMs'],
    [{ maxClockSkewMs: -5 }, 'maxClockSkewMs'],
    [{ ttlMs: 1000, maxClockSkewMs: 100, renewIntervalMs: 900 }, 'renewIntervalMs'],
    [{ name: '' }, 'name'],
  ])('refuses %o naming %s', (bad, path) => {
    const { make } = setup();
    try {
      make(0.3, bad);
      expect.unreachable('constructor accepted bad settings');
    } catch (error) {
      expect(error).toBeInstanceOf(DomainError);
      expect((error as DomainError).code).toBe(ErrorCode.InvalidArgument);
      expect((error as DomainError).problems.map((p) => p.path)).toContain(path);
    }
  });

  it('start() without a scheduler is an error, tick() works without one', async () => {
    const store = new MemoryLeaseStore();
    const elector = new LeaderElector({ store, clock: new ManualClock(), rng: seq(0.5), ttlMs: TTL, renewIntervalMs: RENEW, maxClockSkewMs: SKEW });
    expect(() => elector.start()).toThrow(/scheduler/);
    await elector.tick();
    expect(elector.isLeader()).toBe(true);
  });
});

describe('randomOwnerId', () => {
  it('is 32 hex characters drawn from the rng, different for different draws', () => {
    const a = randomOwnerId(seq(0.1, 0.2, 0.3, 0.4));
    const b = randomOwnerId(seq(0.1, 0.2, 0.3, 0.41));
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(b).not.toBe(a);
    expect(randomOwnerId(seq(0.1, 0.2, 0.3, 0.4))).toBe(a);
  });
});

describe('LeaderElector', () => {
  it('acquires a free lease, renews it, and keeps the generation across renewals', async () => {
    const { elector, scheduler, clock, terms, store } = setup();
    expect(elector.isLeader()).toBe(false);
    expect(() => elector.fence()).toThrow(DomainError);
    elector.start();
    await scheduler.runUntil(clock.t);
    expect(elector.isLeader()).toBe(true);
    expect(terms).toEqual([{ ownerId: elector.ownerId, generation: 1, startedAt: 1_000_000 }]);
    expect(elector.fence()).toEqual({ kind: 'lease', lease: 'controller', owner: elector.ownerId, generation: 1 });
    expect(elector.validUntil()).toBe(1_000_000 + TTL - SKEW);
    await scheduler.runUntil(1_000_000 + 5 * RENEW);
    expect(store.claims).toBe(6);
    expect(elector.validUntil()).toBe(1_000_000 + 5 * RENEW + TTL - SKEW);
    expect(elector.generation).toBe(1);
    expect(terms).toHaveLength(1);
    await elector.stop();
  });

  it('keeps a claim through a store outage for exactly ttl - skew after the last successful claim, then lets go', async () => {
    const { elector, scheduler, clock, ends, errors, store } = setup();
    elector.start();
    await scheduler.runUntil(clock.t + 2 * RENEW); // last success at +400
    const lastSuccess = clock.t;
    store.failing = true;
    const keptUntil = lastSuccess + TTL - SKEW;
    await scheduler.runUntil(keptUntil - 1);
    expect(elector.isLeader()).toBe(true);
    expect(errors.length).toBeGreaterThan(0);
    await scheduler.runUntil(keptUntil);
    expect(elector.isLeader()).toBe(false);
    expect(ends).toEqual([{ ownerId: elector.ownerId, generation: 1, reason: 'expired', at: keptUntil }]);
    // Back again: nobody else took it, so the same owner resumes with the same generation.
    store.failing = false;
    await scheduler.runUntil(clock.t + RENEW);
    expect(elector.isLeader()).toBe(true);
    expect(elector.generation).toBe(1);
    await elector.stop();
  });

  it('gives up on time while a claim hangs (the lapse does not wait for the store)', async () => {
    const { elector, scheduler, clock, ends, store } = setup();
    elector.start();
    await scheduler.runUntil(clock.t);
    const lastSuccess = clock.t;
    let unblock!: () => void;
    store.hang = new Promise((resolve) => (unblock = resolve));
    await scheduler.runUntil(lastSuccess + TTL - SKEW);
    expect(elector.isLeader()).toBe(false);
    expect(ends.map((e) => [e.reason, e.at])).toEqual([['expired', lastSuccess + TTL - SKEW]]);
    store.hang = undefined;
    unblock();
    await elector.stop();
  });

  it('does not act on an answer that arrives after the claim it made would have lapsed', async () => {
    const { elector, clock, terms, store } = setup();
    let unblock!: () => void;
    store.hang = new Promise((resolve) => (unblock = resolve));
    const pending = elector.tick();
    clock.t += TTL - SKEW;
    store.hang = undefined;
    unblock();
    await pending;
    expect(elector.isLeader()).toBe(false);
    expect(terms).toHaveLength(0);
  });

  it('a standby takes over only after the leader stopped renewing and its claim expired; terms never overlap', async () => {
    const { make, scheduler, clock, store, terms, ends } = setup();
    const a = make(0.11);
    const b = make(0.22);
    a.start();
    await scheduler.runUntil(clock.t);
    b.start();
    await scheduler.runUntil(clock.t + 3 * RENEW);
    expect(a.isLeader()).toBe(true);
    expect(b.isLeader()).toBe(false);
    // A is partitioned from the store (it fails, B still reaches it).
    const partitioned: LeaseStore = { claim: () => Promise.reject(new Error('partition')), release: () => Promise.reject(new Error('partition')) };
    const aLast = store.rows.get('controller')!.expiresAt - TTL;
    (a as unknown as { options: LeaderElectorOptions }).options = { ...(a as unknown as { options: LeaderElectorOptions }).options, store: partitioned };
    for (let t = clock.t; t < aLast + TTL + 2 * RENEW; t += 10) {
      await scheduler.runUntil(t);
      expect(a.isLeader() && b.isLeader()).toBe(false);
    }
    expect(b.isLeader()).toBe(true);
    expect(b.generation).toBe(2);
    const aEnd = ends.find((e) => e.ownerId === a.ownerId)!;
    const bStart = terms.find((t) => t.ownerId === b.ownerId)!;
    expect(aEnd).toMatchObject({ reason: 'expired', at: aLast + TTL - SKEW });
    expect(bStart.startedAt).toBeGreaterThanOrEqual(aLast + TTL);
    expect(bStart.startedAt).toBeLessThanOrEqual(aLast + TTL + RENEW);
    await a.stop();
    await b.stop();
  });

  it('a restarted process gets a new owner id and does not inherit its predecessor\'s claim', async () => {
    const { make, store, clock } = setup();
    const before = make(0.5);
    await before.tick();
    expect(before.isLeader()).toBe(true);
    const after = make(0.6); // same process, restarted: new rng draw, new id
    expect(after.ownerId).not.toBe(before.ownerId);
    await after.tick();
    expect(after.isLeader()).toBe(false);
    clock.t += TTL;
    await after.tick();
    expect(after.isLeader()).toBe(true);
    expect(after.generation).toBe(2);
    expect(store.rows.get('controller')!.owner).toBe(after.ownerId);
  });

  it('ends the term as lost when the store says another owner holds the lease', async () => {
    const { elector, store, clock, ends } = setup();
    await elector.tick();
    store.rows.set('controller', { name: 'controller', owner: 'someone-else', generation: 7, expiresAt: clock.t + TTL, acquiredAt: clock.t });
    clock.t += RENEW;
    await elector.tick();
    expect(elector.isLeader()).toBe(false);
    expect(ends).toEqual([{ ownerId: elector.ownerId, generation: 1, reason: 'lost', at: clock.t }]);
  });

  it('starts a new term when the generation changed between two of its claims', async () => {
    const { elector, store, clock, log } = setup();
    await elector.tick();
    const row = store.rows.get('controller')!;
    store.rows.set('controller', { ...row, generation: 3 }); // someone held it in between and it came back to us
    clock.t += RENEW;
    await elector.tick();
    expect(elector.generation).toBe(3);
    expect(log).toEqual(['start 1999 g1 @0', 'stop 1999 lost @200', 'start 1999 g3 @200']);
  });

  it('stop() ends the term first, then releases so a standby takes over without waiting for the ttl', async () => {
    const { make, clock, store, log } = setup();
    const a = make(0.7);
    const b = make(0.8);
    await a.tick();
    await b.tick();
    await a.stop();
    expect(a.isLeader()).toBe(false);
    expect(store.rows.get('controller')!.expiresAt).toBe(0);
    await b.tick();
    expect(b.isLeader()).toBe(true);
    expect(b.generation).toBe(2);
    expect(log.map((l) => l.split(' ').slice(0, 3).join(' '))).toEqual([`start ${a.ownerId.slice(0, 4)} g1`, `stop ${a.ownerId.slice(0, 4)} stopped`, `start ${b.ownerId.slice(0, 4)} g2`]);
    expect(clock.t).toBe(1_000_000);
  });

  it('reports a callback that throws and keeps leading', async () => {
    const { make, errors } = setup();
    const elector = make(0.9, {
      onStartedLeading: () => {
        throw new Error('callback broke');
      },
    });
    await elector.tick();
    expect(elector.isLeader()).toBe(true);
    expect(errors).toEqual([new Error('callback broke')]);
  });
});

describe('AlwaysLeader', () => {
  it('leads unconditionally with no fence, and calls back on start and stop', async () => {
    const events: string[] = [];
    const clock = new ManualClock();
    const leader = new AlwaysLeader(clock, seq(0.25), {
      onStartedLeading: (t) => events.push(`start g${t.generation ?? '-'}`),
      onStoppedLeading: (e) => events.push(`stop ${e.reason}`),
    });
    expect(leader.isLeader()).toBe(true);
    expect(leader.fence()).toBe(NO_FENCE);
    expect(leader.generation).toBeUndefined();
    leader.start();
    leader.start();
    await leader.stop();
    expect(leader.isLeader()).toBe(false);
    expect(events).toEqual(['start g-', 'stop stopped']);
    expect(leader.ownerId).toMatch(/^[0-9a-f]{32}$/);
  });
});
