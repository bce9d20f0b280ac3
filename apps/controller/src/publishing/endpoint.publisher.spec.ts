import { Catalog } from '@llmgw/catalog';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { NodeEntry, ReplicaEntry } from '@llmgw/control';
import type { EndpointSnapshot } from '@llmgw/domain';
import { EndpointPublisher } from './endpoint.publisher';

const catalog = Catalog.create({
  models: [{ name: 'llama', aliases: ['l'], source: 'hf://o/llama@main', size: 1, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100' }] }],
});

function node(id: string, state: NodeEntry['info']['state'] = 'healthy', address = `10.0.0.${id.slice(-1)}`): NodeEntry {
  return {
    info: { id, address, labels: {}, gpus: [], cpuCores: 1, memoryBytes: 1, cache: { dir: '/', totalBytes: 0, freeBytes: 0, entries: [] }, state, cordoned: false },
    connected: true,
    draining: false,
    reported: new Map(),
  };
}

function replica(id: string, nodeId: string, state: ReplicaEntry['replica']['state'] = 'ready', port: number | null = 8000, model = 'llama'): ReplicaEntry {
  return {
    replica: { id, model, profileIndex: 0, engine: 'vllm', members: [{ nodeId, rank: 0, gpuIndices: [0], ...(port !== null ? { port } : {}) }], state, restarts: 0, createdAt: 0, updatedAt: 0 },
    memberStates: {},
    persisted: true,
    dirty: false,
    fetching: [],
  };
}

describe('EndpointPublisher', () => {
  it('publishes nothing before open, then a new revision only when something routers see changed', () => {
    const nodes = new Map([[ 'n1', node('n1') ]]);
    let replicas: ReplicaEntry[] = [];
    let current: { catalog: Catalog; revision: number } | undefined = { catalog, revision: 1 };
    const publisher = new EndpointPublisher({ nodes: () => nodes, replicas: () => replicas, catalog: () => current }, pino({ level: 'silent' }));
    const got: EndpointSnapshot[] = [];
    publisher.attach({ publish: (s) => got.push(s) });
    expect(publisher.refresh()).toBeUndefined();
    publisher.open();
    expect(got.map((s) => s.revision)).toEqual([1]);
    publisher.refresh();
    expect(got).toHaveLength(1);
    replicas = [replica('r1', 'n1')];
    publisher.refresh();
    replicas = [replica('r1', 'n1', 'ready')];
    publisher.refresh(); // same endpoints: no new revision
    current = { catalog, revision: 2 };
    publisher.refresh();
    expect(got.map((s) => [s.revision, s.endpoints.length, s.catalog.revision])).toEqual([
      [1, 0, 1],
      [2, 1, 1],
      [3, 1, 2],
    ]);
    // A sink attached later gets the current snapshot at once.
    const late: EndpointSnapshot[] = [];
    publisher.attach({ publish: (s) => late.push(s) });
    expect(late.map((s) => s.revision)).toEqual([3]);
  });

  it('detaches a sink that throws and keeps serving the others', () => {
    const publisher = new EndpointPublisher({ nodes: () => new Map(), replicas: () => [], catalog: () => undefined }, pino({ level: 'silent' }));
    const good: number[] = [];
    publisher.attach({ publish: () => { throw new Error('boom'); } });
    publisher.attach({ publish: (s) => good.push(s.revision) });
    publisher.open();
    expect(publisher.sinkCount).toBe(1);
    expect(good).toEqual([1]);
  });

  it('on leadership loss ends every remote sink (detached, nothing more sent) and keeps in-process ones', () => {
    let replicas: ReplicaEntry[] = [];
    const nodes = new Map([['n1', node('n1')]]);
    const publisher = new EndpointPublisher({ nodes: () => nodes, replicas: () => replicas, catalog: () => ({ catalog, revision: 1 }) }, pino({ level: 'silent' }));
    const remote: (number | 'lost')[] = [];
    const local: number[] = [];
    publisher.attach({ publish: (s) => remote.push(s.revision), leadershipLost: () => remote.push('lost') });
    publisher.attach({ publish: (s) => local.push(s.revision) });
    publisher.open();
    publisher.leadershipLost();
    expect(publisher.sinkCount).toBe(1);
    replicas = [replica('r1', 'n1')];
    publisher.refresh();
    expect(remote).toEqual([1, 'lost']);
    expect(local).toEqual([1, 2]);
  });
});
