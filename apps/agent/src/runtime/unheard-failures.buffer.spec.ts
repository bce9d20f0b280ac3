import { ReplicaState, type ReplicaStatus } from '@llmgw/proto';
import { describe, expect, it } from 'vitest';
import { UNHEARD_FAILURES_MAX, UnheardFailures } from './unheard-failures.buffer';

const failed = (replicaId: string, restarts = 0): ReplicaStatus => ({ replicaId, state: ReplicaState.REPLICA_STATE_FAILED, lastLogLines: [], restarts, reason: 'exit 1' });

describe('UnheardFailures', () => {
  it('hands over what it holds, oldest first, and is empty after', () => {
    const u = new UnheardFailures();
    u.record(failed('r-1'), 1);
    u.record(failed('r-2', 1), 2);
    expect(u.take()).toEqual({ failures: [{ status: failed('r-1'), atUnixMs: 1 }, { status: failed('r-2', 1), atUnixMs: 2 }], dropped: 0 });
    expect(u.size).toBe(0);
    expect(u.take()).toEqual({ failures: [], dropped: 0 });
  });

  it('keeps the newest when full and counts what it dropped', () => {
    const u = new UnheardFailures();
    for (let i = 0; i < UNHEARD_FAILURES_MAX + 5; i++) u.record(failed('r-1', i), i);
    expect(u.size).toBe(UNHEARD_FAILURES_MAX);
    const { failures, dropped } = u.take();
    expect(dropped).toBe(5);
    expect(failures[0].atUnixMs).toBe(5);
  });
});
