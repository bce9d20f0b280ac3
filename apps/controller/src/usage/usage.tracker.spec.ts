import type { Replica } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { ReplicaRegistry } from '../replicas/replica.registry';
import { UsageTracker } from './usage.tracker';

function replica(id: string, lastUsedAt?: number): Replica {
  return {
    id,
    model: 'm',
    profileIndex: 0,
    engine: 'vllm',
    members: [{ nodeId: 'n1', rank: 0, gpuIndices: [0] }],
    state: 'ready',
    restarts: 0,
    createdAt: 0,
    updatedAt: 0,
    ...(lastUsedAt !== undefined ? { lastUsedAt } : {}),
  };
}

function setup(): { replicas: ReplicaRegistry; usage: UsageTracker } {
  const replicas = new ReplicaRegistry();
  replicas.loadFromStore([replica('r-1', 5_000), replica('r-2')]);
  return { replicas, usage: new UsageTracker(replicas) };
}

describe('UsageTracker', () => {
  it('applies router reports newest-wins, queues them for the store, and leaves unreported replicas unknown', () => {
    const { replicas, usage } = setup();
    usage.report('router-a', new Map([['r-1', 4_000], ['ghost', 9_000], ['r-2', 0]]));
    expect(replicas.get('r-1')?.replica.lastUsedAt).toBe(5_000);
    expect(replicas.get('r-2')?.replica.lastUsedAt).toBeUndefined();
    usage.report('router-b', new Map([['r-1', 6_000]]));
    expect(replicas.get('r-1')?.replica.lastUsedAt).toBe(6_000);
    expect(usage.takePending()).toEqual(new Map([['r-1', 6_000], ['ghost', 9_000]]));
    expect(usage.takePending()).toEqual(new Map());
  });

  it('merges usage read back from the store newest-wins, without queueing it to be written again', () => {
    const { replicas, usage } = setup();
    usage.merge(new Map([['r-1', 4_000], ['r-2', 7_000], ['ghost', 1]]));
    expect(replicas.get('r-1')?.replica.lastUsedAt).toBe(5_000);
    expect(replicas.get('r-2')?.replica.lastUsedAt).toBe(7_000);
    expect(replicas.get('ghost')).toBeUndefined();
    expect(usage.takePending()).toEqual(new Map());
  });
});
