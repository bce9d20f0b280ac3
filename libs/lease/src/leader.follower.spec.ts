import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { holderRenewing, LeaderFollower, reconnectDelay, type FollowOutcome } from './leader.follower';

describe('reconnectDelay', () => {
  it('stays within [half, all] of an exponential step capped at the maximum', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 0, max: 120_000 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (failures, minMs, extra, r) => {
        const bounds = { minMs, maxMs: minMs + extra };
        const step = Math.min(bounds.maxMs, minMs * 2 ** (failures - 1));
        const delay = reconnectDelay(failures, bounds, { next: () => r });
        expect(delay).toBeGreaterThanOrEqual(Math.floor(step / 2));
        expect(delay).toBeLessThanOrEqual(Math.ceil(step));
        expect(delay).toBeLessThanOrEqual(bounds.maxMs);
      }),
    );
  });

  it('doubles per failure until the cap, and spreads a fleet apart', () => {
    const bounds = { minMs: 500, maxMs: 30_000 };
    const top = { next: () => 0.999999 };
    expect([1, 2, 3, 4, 7, 8, 20].map((f) => reconnectDelay(f, bounds, top))).toEqual([500, 1000, 2000, 4000, 30_000, 30_000, 30_000]);
    let x = 7;
    const rng = { next: () => ((x = (x * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31) };
    const fleet = Array.from({ length: 50 }, () => reconnectDelay(5, bounds, rng));
    expect(new Set(fleet).size).toBeGreaterThan(40);
  });
});

const FAIL: FollowOutcome = { kind: 'failed' };
const standby = (leaderAddress?: string): FollowOutcome => ({ kind: 'notLeader', ...(leaderAddress !== undefined ? { leaderAddress } : {}) });
const top = { next: () => 0.999999 };

describe('LeaderFollower', () => {
  const bounds = { minMs: 500, maxMs: 30_000 };

  it('tries the next address at once within a round, and backs off exponentially only after whole rounds nobody answered', () => {
    const f = new LeaderFollower(['a:1', 'b:1', 'c:1'], bounds, top);
    const seen: [string, number][] = [];
    for (let i = 0; i < 9; i++) {
      const at = f.current();
      seen.push([at, f.next(FAIL)]);
    }
    expect(seen).toEqual([
      ['a:1', 0], ['b:1', 0], ['c:1', 500],
      ['a:1', 0], ['b:1', 0], ['c:1', 1_000],
      ['a:1', 0], ['b:1', 0], ['c:1', 2_000],
    ]);
  });

  it('follows a NotLeader naming the leader at once, whatever failed before', () => {
    const f = new LeaderFollower(['dead:1', 'standby:1'], bounds, top);
    for (let i = 0; i < 6; i++) f.next(FAIL); // three rounds of nothing: the backoff has grown
    expect(f.current()).toBe('dead:1');
    expect(f.next(FAIL)).toBe(0);
    expect(f.current()).toBe('standby:1');
    expect(f.next(standby('leader:1'))).toBe(0);
    expect(f.current()).toBe('leader:1');
    f.connected();
    // The leader's stream ends: the list is tried from where it was, at once.
    expect(f.next(FAIL)).toBe(0);
    expect(f.current()).toBe('dead:1');
  });

  it('does not grow the pause while standbys answer NotLeader without a leader', () => {
    const f = new LeaderFollower(['dead:1', 'standby:1'], bounds, top);
    const pauses: number[] = [];
    for (let round = 0; round < 20; round++) {
      expect(f.next(FAIL)).toBe(0);
      pauses.push(f.next(standby()));
    }
    expect(new Set(pauses)).toEqual(new Set([500]));
  });

  it('a NotLeader naming the dead leader costs one attempt, not a growing backoff', () => {
    const f = new LeaderFollower(['dead:1', 'standby:1'], bounds, top);
    const delays: number[] = [];
    for (let i = 0; i < 30; i++) {
      const at = f.current();
      delays.push(f.next(at === 'standby:1' ? standby('dead:1') : FAIL));
    }
    expect(Math.max(...delays)).toBeLessThanOrEqual(bounds.minMs);
  });

  it('two standbys naming each other are followed a bounded number of times, then paused', () => {
    const f = new LeaderFollower(['a:1', 'b:1'], bounds, top);
    const delays: number[] = [];
    for (let i = 0; i < 12; i++) delays.push(f.next(standby(f.current() === 'a:1' ? 'b:1' : 'a:1')));
    expect(delays.filter((d) => d > 0).length).toBeGreaterThanOrEqual(3);
    for (const d of delays) expect([0, 500]).toContain(d);
  });

  it('follows a leader address that is not in the list, and goes back to the list when it fails', () => {
    const f = new LeaderFollower(['a:1', 'b:1'], bounds, top);
    f.next(standby('elsewhere:9'));
    expect(f.current()).toBe('elsewhere:9');
    f.next(FAIL);
    expect(['a:1', 'b:1']).toContain(f.current());
  });

  it('connected() starts the backoff over', () => {
    const f = new LeaderFollower(['a:1'], bounds, top);
    expect([f.next(FAIL), f.next(FAIL), f.next(FAIL)]).toEqual([500, 1_000, 2_000]);
    f.connected();
    expect(f.next(FAIL)).toBe(500);
  });

  it('refuses an empty list', () => {
    expect(() => new LeaderFollower([], bounds, top)).toThrow(/no controller addresses/);
  });
});

describe('holderRenewing', () => {
  const ttl = 15_000;
  const renew = 5_000;
  it.each([
    ['just renewed', 15_000, true],
    ['one renewal due, a little late', 9_000, true],
    ['two renewals missed', 5_000, false],
    ['expired', 0, false],
    ['long expired', -60_000, false],
  ])('%s (%i ms left): %s', (_name, left, renewing) => {
    const now = 1_000_000;
    expect(holderRenewing({ expiresAt: now + left }, now, ttl, renew)).toBe(renewing);
  });
});
