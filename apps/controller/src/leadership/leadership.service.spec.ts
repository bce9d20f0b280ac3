// What a standby says about the leader: only a holder that advertised an address and is still
// renewing its claim is named; one that died is not, though its lease row is unexpired.
import type { LeaseRecord } from '@llmgw/lease';
import { FakeClock } from '@llmgw/testing';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { LeaseReader } from './advertised-lease.store';
import { LEADER_LOOKUP_REUSE_MS, LeadershipService } from './leadership.service';

const TTL = 15_000;
const RENEW = 5_000;

/** A lease table of one row, read with the test's clock. */
class OneRow implements LeaseReader {
  row: LeaseRecord | undefined;
  reads = 0;
  failing = false;
  constructor(private readonly clock: FakeClock) {}
  async claim(): Promise<LeaseRecord | undefined> {
    return undefined;
  }
  async release(): Promise<void> {}
  async get(): Promise<(LeaseRecord & { held: boolean }) | undefined> {
    this.reads += 1;
    if (this.failing) throw new Error('store down');
    return this.row && { ...this.row, held: this.row.expiresAt > this.clock.now() };
  }
}

function standby(address = '10.0.0.2:8082') {
  const clock = new FakeClock();
  const leases = new OneRow(clock);
  const service = new LeadershipService(
    { name: 'controller', ttlMs: TTL, renewIntervalMs: RENEW },
    leases,
    { address },
    clock,
    { startedLeading: () => undefined, stoppedLeading: () => undefined },
    pino({ level: 'silent' }),
    { next: () => 0.5 },
  );
  return { clock, leases, service };
}

describe('LeadershipService.leaderElsewhere', () => {
  it('names a renewing leader, and stops naming it two missed renewals after its last one — before its lease lapses', async () => {
    const { clock, leases, service } = standby();
    const renewedAt = clock.now();
    leases.row = { name: 'controller', owner: 'other@10.0.0.1:8082', generation: 3, expiresAt: renewedAt + TTL, acquiredAt: renewedAt - 60_000 };
    expect(await service.leaderElsewhere()).toBe('10.0.0.1:8082');
    clock.advance(RENEW + 1_000); // one renewal late
    expect(await service.leaderElsewhere()).toBe('10.0.0.1:8082');
    clock.advance(RENEW); // two missed: the holder is dead, though its row is held for 4 s more
    expect((await leases.get())?.held).toBe(true);
    expect(await service.leaderElsewhere()).toBeUndefined();
    clock.advance(TTL);
    expect(await service.leaderElsewhere()).toBeUndefined();
  });

  it('names nobody for a holder without an advertised address, for itself, or with no row', async () => {
    const { clock, leases, service } = standby();
    expect(await service.leaderElsewhere()).toBeUndefined();
    leases.row = { name: 'controller', owner: 'other', generation: 1, expiresAt: clock.now() + TTL, acquiredAt: clock.now() };
    expect(await service.leaderElsewhere()).toBeUndefined();
    leases.row = { ...leases.row, owner: `${service.ownerId}@10.0.0.2:8082` };
    expect(await service.leaderElsewhere()).toBeUndefined();
  });

  it('answers a burst of callers from one store read, reads again soon after, and keeps no failed read', async () => {
    const { clock, leases, service } = standby();
    leases.row = { name: 'controller', owner: 'other@10.0.0.1:8082', generation: 3, expiresAt: clock.now() + TTL, acquiredAt: clock.now() };
    const answers = await Promise.all(Array.from({ length: 50 }, () => service.leaderElsewhere()));
    expect(new Set(answers)).toEqual(new Set(['10.0.0.1:8082']));
    expect(leases.reads).toBe(1);
    clock.advance(LEADER_LOOKUP_REUSE_MS);
    leases.row = { ...leases.row, owner: 'third@10.0.0.3:8082' };
    expect(await service.leaderElsewhere()).toBe('10.0.0.3:8082');
    expect(leases.reads).toBe(2);
    clock.advance(LEADER_LOOKUP_REUSE_MS);
    leases.failing = true;
    await expect(service.leaderElsewhere()).rejects.toThrow('store down');
    leases.failing = false;
    expect(await service.leaderElsewhere()).toBe('10.0.0.3:8082');
    expect(leases.reads).toBe(4);
  });
});
