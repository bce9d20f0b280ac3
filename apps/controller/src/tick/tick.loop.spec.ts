import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Phase } from '../leadership/term.service';
import { TickLoop, type TickDeps } from './tick.loop';

/** A tick loop whose parts record what the tick asked of them. */
function setup(role: { leader: boolean; phase: Phase }) {
  const calls: string[] = [];
  const deps: TickDeps = {
    clock: { now: () => 0 },
    timing: { tickMs: 1_000, unreachableAfterMs: 5_000, lostAfterMs: 30_000 } as TickDeps['timing'],
    leadership: { isLeader: () => role.leader },
    term: {
      phase: role.phase,
      leads: () => role.leader && (role.phase === 'settling' || role.phase === 'active'),
      checkSettled: () => calls.push('checkSettled'),
      refreshStandby: async () => void calls.push('refreshStandby'),
    },
    nodes: { checkHealth: () => [] },
    catalog: { poll: async () => calls.push('catalog') < 0 },
    keys: { poll: async () => calls.push('keys') > 0 },
    usage: { merge: () => undefined },
    store: { replicas: { listUsage: async () => new Map() } },
    reconciler: { pass: async () => void calls.push('pass') },
    persister: { flush: async (o) => void calls.push(`flush nodes=${o?.nodes} replicas=${o?.replicas}`) },
    publisher: { refresh: () => void calls.push('refresh') },
    recordEvent: () => undefined,
  };
  return { loop: new TickLoop(deps, pino({ level: 'silent' })), calls };
}

describe('TickLoop', () => {
  it('a standby reads the store, the catalog and the API keys, and writes only usage', async () => {
    const { loop, calls } = setup({ leader: false, phase: 'standby' });
    await loop.tick();
    expect(calls).toEqual(['refreshStandby', 'catalog', 'keys', 'flush nodes=false replicas=false', 'refresh']);
  });

  it('an active leader checks health and settling, polls, passes and flushes everything', async () => {
    const { loop, calls } = setup({ leader: true, phase: 'active' });
    await loop.tick();
    expect(calls).toEqual(['checkSettled', 'catalog', 'keys', 'pass', 'flush nodes=true replicas=true', 'refresh']);
  });
});
