import type { ReplicaState } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import type { ReplicaEntry } from './replica.entry';
import { foldMemberReport } from './replica-state.folder';

function entry(state: ReplicaState, nodes = ['n1'], memberStates: Record<string, ReplicaState> = {}): ReplicaEntry {
  return {
    replica: {
      id: 'r1',
      model: 'm',
      profileIndex: 0,
      engine: 'vllm',
      members: nodes.map((nodeId, rank) => ({ nodeId, rank, gpuIndices: [0] })),
      state,
      restarts: 0,
      createdAt: 0,
      updatedAt: 0,
    },
    memberStates,
    persisted: true,
    dirty: false,
    fetching: [],
  };
}

describe('foldMemberReport', () => {
  it.each<[string, ReplicaEntry, { nodeId: string; state: ReplicaState; port?: number; reason?: string }, ReplicaState]>([
    ['single member ready', entry('starting'), { nodeId: 'n1', state: 'ready', port: 8000 }, 'ready'],
    ['single member starting', entry('pending'), { nodeId: 'n1', state: 'starting' }, 'starting'],
    ['stopping on its own is failing', entry('ready'), { nodeId: 'n1', state: 'stopped' }, 'failed'],
    ['multi-node: one ready of two is the least advanced', entry('pending', ['n1', 'n2']), { nodeId: 'n1', state: 'ready', port: 8000 }, 'pending'],
    ['multi-node: both ready', entry('starting', ['n1', 'n2'], { n2: 'ready' }), { nodeId: 'n1', state: 'ready', port: 8000 }, 'ready'],
    ['multi-node: one failed fails it', entry('ready', ['n1', 'n2'], { n1: 'ready', n2: 'ready' }), { nodeId: 'n2', state: 'failed', reason: 'oom' }, 'failed'],
    ['draining: a member stopped, another not yet', entry('draining', ['n1', 'n2']), { nodeId: 'n1', state: 'stopped' }, 'draining'],
    ['draining: all stopped', entry('draining', ['n1', 'n2'], { n2: 'stopped' }), { nodeId: 'n1', state: 'stopped' }, 'stopped'],
    ['draining ignores ready reports', entry('draining'), { nodeId: 'n1', state: 'ready' }, 'draining'],
    ['lost ignores reports', entry('lost'), { nodeId: 'n1', state: 'ready' }, 'lost'],
    ['a node that is not a member changes nothing', entry('pending'), { nodeId: 'other', state: 'ready' }, 'pending'],
  ])('%s', (_name, e, report, state) => {
    expect(foldMemberReport(e, report, 100).replica.state).toBe(state);
  });

  it('takes the rank-0 port, stamps failedAt on entering failed and clears it on leaving', () => {
    const ready = foldMemberReport(entry('starting'), { nodeId: 'n1', state: 'ready', port: 8123 }, 100);
    expect(ready.replica.members[0].port).toBe(8123);
    expect(ready.dirty).toBe(true);
    const failed = foldMemberReport(ready, { nodeId: 'n1', state: 'failed', reason: 'exit 1' }, 200);
    expect(failed).toMatchObject({ failedAt: 200, replica: { state: 'failed', reason: 'exit 1', updatedAt: 200 } });
    const again = foldMemberReport(failed, { nodeId: 'n1', state: 'failed', reason: 'exit 1' }, 300);
    expect(again.failedAt).toBe(200);
    const back = foldMemberReport(failed, { nodeId: 'n1', state: 'starting' }, 400);
    expect(back.failedAt).toBeUndefined();
    expect(back.replica.reason).toBeUndefined();
  });

  it('keeps the rendezvous port rank 0 reports (only rank 0 has one), and marks the entry for writing', () => {
    const announced = foldMemberReport(entry('pending', ['n1', 'n2']), { nodeId: 'n1', state: 'starting', rendezvousPort: 41_234 }, 100);
    expect(announced.replica.members.map((m) => m.rendezvousPort)).toEqual([41_234, undefined]);
    expect(announced.dirty).toBe(true);
    const fromWorker = foldMemberReport(announced, { nodeId: 'n2', state: 'starting', rendezvousPort: 9 }, 200);
    expect(fromWorker.replica.members.map((m) => m.rendezvousPort)).toEqual([41_234, undefined]);
    expect(foldMemberReport(announced, { nodeId: 'n1', state: 'starting', rendezvousPort: 41_234 }, 300)).toBe(announced);
  });

  it('returns the same entry when nothing changes', () => {
    const ready = foldMemberReport(entry('starting'), { nodeId: 'n1', state: 'ready', port: 8000 }, 100);
    expect(foldMemberReport(ready, { nodeId: 'n1', state: 'ready', port: 8000 }, 200)).toBe(ready);
  });
});
