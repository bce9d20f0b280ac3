import { Catalog, cacheName } from '@llmgw/catalog';
import { describe, expect, it } from 'vitest';
import type { NodeEntry } from './node.entry';
import { gcPlan } from './reclaim.planner';

const catalog = Catalog.create({
  models: [{ name: 'llama', source: 'hf://o/llama@main', size: 1, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100' }] }],
});
const WANTED = cacheName('hf://o/llama@main') as string;
const OLD = cacheName('https://example.com/old.gguf') as string;

/** A node whose cache holds `entries` (sizes 100, 200, …; the rest is what gcPlan never reads). */
function cacheNode(id: string, entries: string[], connected = true): NodeEntry {
  const cache = { dir: '/c', totalBytes: 0, freeBytes: 0, entries: entries.map((name, i) => ({ name, sizeBytes: 100 * (i + 1), modifiedAt: i })) };
  return { info: { id, address: 'a', labels: {}, gpus: [], cpuCores: 1, memoryBytes: 1, cache, state: 'healthy', cordoned: false }, connected, draining: false, reported: new Map() };
}

describe('gcPlan', () => {
  it('lists only entries carrying a cache name that no catalog model wants, per node, with sizes', () => {
    const nodes = new Map([
      ['n2', cacheNode('n2', [OLD, 'hand-copied.safetensors', 'llmgw-not-a-real-name', WANTED], false)],
      ['n1', cacheNode('n1', [WANTED])],
    ]);
    expect(gcPlan(nodes, catalog, 4)).toEqual({
      catalogRevision: 4,
      nodes: [{ nodeId: 'n2', connected: false, entries: [{ name: OLD, sizeBytes: 100, modifiedAt: 0 }], totalBytes: 100 }],
      totalBytes: 100,
    });
  });

  it('lists nothing without a catalog: with nothing known to be unwanted, nothing is', () => {
    expect(gcPlan(new Map([['n1', cacheNode('n1', [OLD])]]), undefined, 0).nodes).toEqual([]);
  });

  it('orders nodes by id and entries by name, and sums bytes per node and in all', () => {
    const other = cacheName('https://example.com/other.gguf') as string;
    const nodes = new Map([
      ['n9', cacheNode('n9', [other, OLD])],
      ['n3', cacheNode('n3', [WANTED, OLD])],
    ]);
    const plan = gcPlan(nodes, catalog, 1);
    expect(plan.nodes.map((n) => n.nodeId)).toEqual(['n3', 'n9']);
    expect(plan.nodes[1].entries.map((e) => e.name)).toEqual([other, OLD].sort());
    expect(plan.nodes.map((n) => n.totalBytes)).toEqual([200, 300]);
    expect(plan.totalBytes).toBe(500);
  });
});
