import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { CloseReason } from '../nodes/agent-commands.port';
import type { NodeRecord } from '@llmgw/store';
import { NodeRegistry } from '../nodes/node.registry';
import { ReplicaRegistry } from '../replicas/replica.registry';
import { TermService, type Phase } from './term.service';

const SETTLE_MS = 1_000;

function setup(opts: { leader?: boolean; elsewhere?: string; nodes?: () => Promise<NodeRecord[]> } = {}) {
  let now = 10_000;
  let leader = opts.leader ?? true;
  const calls: string[] = [];
  const phases: Phase[] = [];
  const registry = new NodeRegistry();
  const term = new TermService(
    {
      clock: { now: () => now },
      timing: { settleMs: SETTLE_MS, settleHoldersMs: 500, tickMs: 10 },
      store: { nodes: { list: opts.nodes ?? (() => Promise.resolve([])) }, replicas: { list: () => Promise.resolve([]) } },
      leadership: { isLeader: () => leader, leaderElsewhere: () => Promise.resolve(opts.elsewhere) },
      nodes: registry,
      replicas: new ReplicaRegistry(),
      publishing: { open: () => calls.push('open'), leadershipLost: () => calls.push('leadershipLost') },
      commands: { closeAll: (reason: CloseReason) => calls.push(`closeAll:${reason}`) },
    },
    pino({ level: 'silent' }),
  );
  term.onPhase((p) => phases.push(p));
  return {
    term,
    calls,
    phases,
    advance: (ms: number) => (now += ms),
    lose: () => (leader = false),
    regain: () => (leader = true),
    nodes: registry,
  };
}

describe('TermService', () => {
  it('a new term loads the store, settles, and acts once the window is over (none awaited: the whole window)', async () => {
    const { term, calls, phases, advance } = setup();
    term.startedLeading();
    expect(term.phase).toBe('loading');
    await term.whenLoaded();
    expect(term.phase).toBe('settling');
    expect(calls).toEqual(['open']);
    expect(term.mayAct()).toBe(false);
    term.checkSettled();
    expect(term.phase).toBe('settling');
    advance(SETTLE_MS);
    term.checkSettled();
    expect(term.phase).toBe('active');
    expect(term.mayAct()).toBe(true);
    expect(phases).toEqual(['loading', 'settling', 'active']);
  });

  it('losing the lead makes a standby at once: every agent is told NotLeader, routers are told the lead is lost', async () => {
    const { term, calls, phases, lose } = setup();
    term.startedLeading();
    await term.whenLoaded();
    lose();
    term.stoppedLeading();
    expect(term.phase).toBe('standby');
    expect(calls).toEqual(['open', 'closeAll:not-leader', 'leadershipLost']);
    expect(phases.at(-1)).toBe('standby');
  });

  it('admits agents as leader once loaded, and names the leader elsewhere as a standby', async () => {
    const leading = setup();
    leading.term.startedLeading();
    expect(await leading.term.admit()).toEqual({ leader: true });
    const standby = setup({ leader: false, elsewhere: '10.0.0.2:7001' });
    expect(await standby.term.admit()).toEqual({ leader: false, leaderAddress: '10.0.0.2:7001' });
    expect(await setup({ leader: false }).term.admit()).toEqual({ leader: false });
  });

  it('leads only while leading with the state loaded: not while loading, not once the lead is lost or the controller stops', async () => {
    const { term, lose } = setup();
    expect(term.leads()).toBe(false);
    term.startedLeading();
    expect(term.phase).toBe('loading');
    expect(term.leads()).toBe(false);
    await term.whenLoaded();
    expect(term.leads()).toBe(true);
    // The lease lapses before the elector's callback runs: no longer leading already.
    lose();
    expect(term.leads()).toBe(false);
    term.stoppedLeading();
    expect(term.leads()).toBe(false);
    const stopping = setup();
    stopping.term.startedLeading();
    await stopping.term.whenLoaded();
    stopping.term.stop();
    expect(stopping.term.leads()).toBe(false);
  });

  it('a load from a term that ended applies nothing once a new term has loaded and agents registered', async () => {
    const reads: ((nodes: NodeRecord[]) => void)[] = [];
    const { term, lose, regain, nodes, phases } = setup({ nodes: () => new Promise((resolve) => reads.push(resolve)) });
    term.startedLeading();
    // The claim lapses while the first load waits on the store, then the same owner wins again.
    lose();
    term.stoppedLeading();
    regain();
    term.startedLeading();
    const admitted = term.admit();
    expect(reads).toHaveLength(2);
    reads[1]([]);
    expect(await admitted).toEqual({ leader: true });
    nodes.register({ id: 'node-1', address: '10.0.0.1', labels: {}, gpus: [], cpuCores: 8, memoryBytes: 64, cacheDir: '/c', cacheEntries: [], replicas: [], agentVersion: '' }, 10_000);
    expect(nodes.get('node-1')?.connected).toBe(true);
    // The first term's read answers last, from before node-1 was stored.
    reads[0]([]);
    await new Promise((r) => setTimeout(r, 0));
    expect(nodes.get('node-1')?.connected).toBe(true);
    expect(phases).toEqual(['loading', 'standby', 'loading', 'settling']);
  });

  it('an agent admitted while a term loaded that then ended waits for the next term of the same leader', async () => {
    const reads: ((nodes: NodeRecord[]) => void)[] = [];
    const { term, lose, regain } = setup({ nodes: () => new Promise((resolve) => reads.push(resolve)) });
    term.startedLeading();
    const early = term.admit();
    lose();
    term.stoppedLeading();
    regain();
    term.startedLeading();
    reads[0]([]);
    await new Promise((r) => setTimeout(r, 0));
    expect(term.phase).toBe('loading');
    reads[1]([]);
    expect(await early).toEqual({ leader: true });
  });

  it('stopped: never acts again, and turns agents away', async () => {
    const { term, advance } = setup({ elsewhere: undefined });
    term.startedLeading();
    await term.whenLoaded();
    advance(SETTLE_MS);
    term.checkSettled();
    expect(term.mayAct()).toBe(true);
    term.stop();
    expect(term.mayAct()).toBe(false);
    expect(await term.admit()).toEqual({ leader: false });
  });
});
