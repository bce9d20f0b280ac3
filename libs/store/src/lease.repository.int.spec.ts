import { DomainError, ErrorCode, type Replica } from '@llmgw/domain';
import { LeaderElector, type LeaseStore } from '@llmgw/lease';
import { FakeClock, SeededRng, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './store.factory';

// One table of lease cases, run on SQLite and on PostgreSQL, each case on a fresh database
// (a lease row leaking between cases is how an earlier harness passed on SQLite only).

const TTL = 1_000;
const RENEW = 200;
const SKEW = 100;

function replica(id: string, at: number): Replica {
  return {
    id,
    model: 'm',
    profileIndex: 0,
    engine: 'llamacpp',
    members: [{ nodeId: 'n1', rank: 0, gpuIndices: [], port: 8001 }],
    state: 'pending',
    restarts: 0,
    createdAt: at,
    updatedAt: at,
  };
}

describe.each(testBackends())('lease on $name', (backend) => {
  let db: TestDatabase;
  let store: Store;
  let clock: FakeClock;
  const extra: Store[] = [];

  beforeEach(async () => {
    clock = new FakeClock();
    db = await backend.create();
    store = await openStore(db.url, { clock });
  });
  afterEach(async () => {
    for (const s of extra.splice(0)) await s.close();
    await store.close();
    await db.drop();
  });

  const elector = (seed: number, leases: LeaseStore = store.leases) =>
    new LeaderElector({ store: leases, clock, rng: new SeededRng(seed), ttlMs: TTL, renewIntervalMs: RENEW, maxClockSkewMs: SKEW });

  it('acquires a free lease (generation 1)', async () => {
    const now = clock.now();
    expect(await store.leases.claim('controller', 'a', now, TTL)).toEqual({ name: 'controller', owner: 'a', generation: 1, expiresAt: now + TTL, acquiredAt: now });
    expect(await store.leases.get('controller')).toMatchObject({ owner: 'a', held: true });
  });

  it('renews its own lease: later expiry, same generation and acquiredAt', async () => {
    const t0 = clock.now();
    await store.leases.claim('controller', 'a', t0, TTL);
    const t1 = clock.advance(600);
    expect(await store.leases.claim('controller', 'a', t1, TTL)).toEqual({ name: 'controller', owner: 'a', generation: 1, expiresAt: t1 + TTL, acquiredAt: t0 });
  });

  it('refuses while another owner holds it, up to the last millisecond', async () => {
    const t0 = clock.now();
    await store.leases.claim('controller', 'a', t0, TTL);
    expect(await store.leases.claim('controller', 'b', t0 + 1, TTL)).toBeUndefined();
    expect(await store.leases.claim('controller', 'b', t0 + TTL - 1, TTL)).toBeUndefined();
    expect(await store.leases.get('controller')).toMatchObject({ owner: 'a', generation: 1, expiresAt: t0 + TTL });
  });

  it('lets another owner take over once expired, and the generation grows', async () => {
    const t0 = clock.now();
    await store.leases.claim('controller', 'a', t0, TTL);
    const t1 = t0 + TTL;
    expect(await store.leases.claim('controller', 'b', t1, TTL)).toEqual({ name: 'controller', owner: 'b', generation: 2, expiresAt: t1 + TTL, acquiredAt: t1 });
    expect(await store.leases.claim('controller', 'a', t1 + 1, TTL)).toBeUndefined();
    expect(await store.leases.claim('controller', 'a', t1 + TTL, TTL)).toMatchObject({ owner: 'a', generation: 3 });
  });

  it('racing acquirers on separate connections: exactly one wins, for a free and for an expired lease', async () => {
    for (let i = 0; i < 6; i++) extra.push(await openStore(db.url, { clock, migrate: false }));
    const racers = [store, ...extra];
    const now = clock.now();
    const free = await Promise.all(racers.map((s, i) => s.leases.claim('controller', `owner-${i}`, now, TTL)));
    const freeWinners = free.filter((r) => r !== undefined);
    expect(freeWinners).toHaveLength(1);
    expect(freeWinners[0]!.generation).toBe(1);

    const later = now + TTL;
    const expired = await Promise.all(racers.map((s, i) => s.leases.claim('controller', `late-${i}`, later, TTL)));
    const expiredWinners = expired.filter((r) => r !== undefined);
    expect(expiredWinners).toHaveLength(1);
    expect(expiredWinners[0]!.generation).toBe(2);
    expect(await store.leases.get('controller')).toMatchObject({ owner: expiredWinners[0]!.owner, generation: 2 });
  });

  it('a restarted process (new owner id) does not inherit the claim of its previous start', async () => {
    const first = elector(1);
    await first.tick();
    expect(first.isLeader()).toBe(true);
    const restarted = elector(2);
    expect(restarted.ownerId).not.toBe(first.ownerId);
    await restarted.tick();
    expect(restarted.isLeader()).toBe(false);
    clock.advance(TTL - 1);
    await restarted.tick();
    expect(restarted.isLeader()).toBe(false);
    clock.advance(1);
    await restarted.tick();
    expect(restarted.isLeader()).toBe(true);
    expect(restarted.generation).toBe(2);
  });

  it('keeps the claim through a store outage for ttl - skew after the last successful claim, then lets go', async () => {
    let current = await openStore(db.url, { clock, migrate: false });
    const errors: unknown[] = [];
    const leases: LeaseStore = { claim: (...a) => current.leases.claim(...a), release: (...a) => current.leases.release(...a) };
    const leader = new LeaderElector({ store: leases, clock, rng: new SeededRng(3), ttlMs: TTL, renewIntervalMs: RENEW, maxClockSkewMs: SKEW, onError: (e) => errors.push(e) });
    await leader.tick();
    clock.advance(RENEW);
    await leader.tick();
    const lastSuccess = clock.now();
    await current.close(); // the store is gone: every claim now fails
    for (const step of [RENEW, RENEW, RENEW, RENEW, TTL - SKEW - 1 - 4 * RENEW]) {
      clock.advance(step);
      await leader.tick();
      expect(leader.isLeader()).toBe(true);
    }
    expect(clock.now()).toBe(lastSuccess + TTL - SKEW - 1);
    expect(errors).toHaveLength(5);
    expect(errors[0]).toBeInstanceOf(DomainError);
    expect((errors[0] as DomainError).code).toBe(ErrorCode.Unavailable);
    clock.advance(1);
    expect(leader.isLeader()).toBe(false);
    // Meanwhile nobody else could take it before lastSuccess + TTL:
    expect(await store.leases.claim('controller', 'standby', clock.now(), TTL)).toBeUndefined();
    // The store comes back after the claim expired; a standby got there first.
    clock.set(lastSuccess + TTL);
    expect(await store.leases.claim('controller', 'standby', clock.now(), TTL)).toMatchObject({ generation: 2 });
    current = await openStore(db.url, { clock, migrate: false });
    extra.push(current);
    await leader.tick();
    expect(leader.isLeader()).toBe(false);
  });

  it('refuses a fenced write after takeover (and after expiry), and accepts the new leader\'s', async () => {
    const a = elector(4);
    const b = elector(5);
    await a.tick();
    const fenceA = a.fence();
    await store.replicas.place(replica('r1', clock.now()), fenceA);

    clock.advance(TTL); // a stopped renewing; its claim expired but nobody took it yet
    await expect(store.replicas.place(replica('r2', clock.now()), fenceA)).rejects.toMatchObject({ code: ErrorCode.Fenced });

    await b.tick();
    expect(b.generation).toBe(2);
    const late = [
      () => store.replicas.place(replica('r3', clock.now()), fenceA),
      () => store.replicas.update('r1', { state: 'ready', updatedAt: clock.now() }, fenceA),
      () => store.replicas.evict('r1', fenceA),
    ];
    for (const write of late) await expect(write()).rejects.toMatchObject({ code: ErrorCode.Fenced });
    expect((await store.replicas.list()).map((r) => [r.id, r.state])).toEqual([['r1', 'pending']]);

    await store.replicas.update('r1', { state: 'ready', updatedAt: clock.now() }, b.fence());
    expect(await store.replicas.evict('r1', b.fence())).toBe(true);
  });

  it('release lets a standby take over at once; a release by anyone else changes nothing', async () => {
    const t0 = clock.now();
    await store.leases.claim('controller', 'a', t0, TTL);
    await store.leases.release('controller', 'b');
    expect(await store.leases.claim('controller', 'b', t0 + 1, TTL)).toBeUndefined();
    const a = elector(6);
    const b = elector(7);
    clock.advance(TTL);
    await a.tick();
    await b.tick();
    expect([a.isLeader(), b.isLeader()]).toEqual([true, false]);
    await a.stop();
    await b.tick();
    expect(b.isLeader()).toBe(true);
    expect(b.generation).toBe(3);
  });
});
