import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { NodeRegistration } from '@llmgw/control';
import { NodeRegistry } from '../nodes/node.registry';
import { ReplicaRegistry } from '../replicas/replica.registry';
import { UsageTracker } from '../usage/usage.tracker';
import { StatePersister, type PersisterStore } from './state.persister';

function registration(id: string): NodeRegistration {
  return { id, address: '10.0.0.1', labels: {}, gpus: [], cpuCores: 8, memoryBytes: 64, cacheDir: '/c', cacheEntries: [], replicas: [], agentVersion: '' };
}

/** A node table in memory whose upsert of `held` waits until `release()`, then lands. */
function heldStore(held: string) {
  const rows = new Map<string, Parameters<PersisterStore['nodes']['upsert']>[0]>();
  let release: () => void = () => undefined;
  let entered: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const reached = new Promise<void>((resolve) => (entered = resolve));
  const store: PersisterStore = {
    nodes: {
      upsert: async (record) => {
        if (record.id === held) {
          entered();
          await gate;
        }
        rows.set(record.id, record);
      },
    },
    replicas: {
      place: () => Promise.reject(new Error('no replicas here')),
      update: () => Promise.reject(new Error('no replicas here')),
      recordUsage: () => Promise.resolve(0),
    },
  };
  return { store, rows, release, reached };
}

describe('StatePersister and a node being forgotten', () => {
  const setup = (held: string) => {
    const nodes = new NodeRegistry();
    const replicas = new ReplicaRegistry();
    const removing = new Set<string>();
    const s = heldStore(held);
    const lead = { held: true };
    const persister = new StatePersister(
      s.store,
      nodes,
      replicas,
      new UsageTracker(replicas),
      () => {
        if (!lead.held) throw new Error('not leading');
        return { kind: 'lease', lease: 'controller', owner: 'me', generation: 1 };
      },
      pino({ level: 'silent' }),
      (id) => removing.has(id),
    );
    /** What ControlPlane.forgetNode does around the persister: mark, wait for a flush in flight, remove. */
    const forget = async (id: string): Promise<void> => {
      removing.add(id);
      try {
        await persister.idle();
        s.rows.delete(id);
      } finally {
        removing.delete(id);
      }
      nodes.remove(id);
    };
    return { nodes, persister, forget, removing, lead, ...s };
  };

  it('a removal waits for a write of that node already in flight, so the row stays gone', async () => {
    const { nodes, persister, forget, rows, release, reached } = setup('n2');
    nodes.register(registration('n1'), 0);
    nodes.register(registration('n2'), 0);
    const flushing = persister.flush();
    await reached; // the flush is inside n2's upsert
    let forgotten = false;
    const forgetting = forget('n2').then(() => (forgotten = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(forgotten).toBe(false); // held behind the write in flight
    release();
    await Promise.all([flushing, forgetting]);
    expect([...rows.keys()]).toEqual(['n1']);
    await persister.flush();
    expect([...rows.keys()]).toEqual(['n1']);
  });

  it('a flush while a node is being forgotten skips it and keeps it queued, should the removal fail', async () => {
    const { nodes, persister, rows, removing } = setup('none');
    removing.add('n2');
    nodes.register(registration('n1'), 0);
    nodes.register(registration('n2'), 0);
    await persister.flush();
    expect([...rows.keys()]).toEqual(['n1']);
    removing.clear(); // the removal failed: the node stays, and its record is written next time
    await persister.flush();
    expect([...rows.keys()].sort()).toEqual(['n1', 'n2']);
  });

  it('a leader deposed in the middle of a flush writes no further node, and keeps the rest queued', async () => {
    const { nodes, persister, rows, release, reached, lead } = setup('n1');
    for (const id of ['n1', 'n2', 'n3']) nodes.register(registration(id), 0);
    const flushing = persister.flush();
    await reached; // n1's upsert is in flight
    lead.held = false;
    release();
    await flushing;
    expect([...rows.keys()]).toEqual(['n1']);
    // A later term of this controller writes them.
    lead.held = true;
    await persister.flush();
    expect([...rows.keys()].sort()).toEqual(['n1', 'n2', 'n3']);
  });
});
