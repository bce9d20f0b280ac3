import { describe, expect, it } from 'vitest';
import { routeHeader } from './proxy.options';

describe('routeHeader (the opt-in debug header)', () => {
  const affinity = { policy: 'prefix-affinity', rank: 0, deflectedFrom: [], cap: 3, averageCap: 2.5, blocks: 8 } as const;

  it("names the replica, the policy and prefix affinity's rank, depth and caps", () => {
    expect(routeHeader('r1', affinity, 0)).toBe('replica=r1; policy=prefix-affinity; rank=0; blocks=8; cap=3; average-cap=2.5');
  });

  it('lists the replicas passed over, and says which one only for having more requests awaiting output', () => {
    expect(routeHeader('r2', { ...affinity, rank: 2, deflectedFrom: ['r0', 'r1'] }, 0)).toBe(
      'replica=r2; policy=prefix-affinity; rank=2; blocks=8; cap=3; average-cap=2.5; deflected=r0,r1',
    );
    expect(routeHeader('r2', { ...affinity, rank: 1, deflectedFrom: ['r1'], busier: 'r1' }, 1)).toBe(
      'replica=r2; policy=prefix-affinity; rank=1; blocks=8; cap=3; average-cap=2.5; deflected=r1; busier=r1; retry=1',
    );
  });

  it('says when the key was cold (not placed by this router lately)', () => {
    expect(routeHeader('r4', { ...affinity, rank: 3, deflectedFrom: ['r0', 'r1', 'r2'], busier: 'r0', cold: true }, 0)).toBe(
      'replica=r4; policy=prefix-affinity; rank=3; blocks=8; cap=3; average-cap=2.5; deflected=r0,r1,r2; busier=r0; cold=true',
    );
  });

  it("says why a prefix-affinity request was chosen by load", () => {
    expect(routeHeader('r3', { policy: 'least-load', fallback: 'all-saturated' }, 0)).toBe('replica=r3; policy=least-load; fallback=all-saturated');
    expect(routeHeader('r3', { policy: 'round-robin' }, 0)).toBe('replica=r3; policy=round-robin');
  });
});
