import { Catalog } from '@llmgw/catalog';
import type { NodeInfo, Replica } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { PREVIEW_MAX_REPLICAS_PER_MODEL, previewPlacement } from './placement-preview.planner';

const GB = 1e9;

function node(id: string, gpus: number, over: Partial<NodeInfo> = {}): NodeInfo {
  return {
    id,
    address: `${id}.local`,
    labels: {},
    gpus: Array.from({ length: gpus }, (_, index) => ({ index, uuid: `${id}-${index}`, name: 'L4', gpuClass: 'L4', memoryTotalBytes: 24 * GB, healthy: true })),
    cpuCores: 16,
    memoryBytes: 64 * GB,
    cache: { dir: '/cache', totalBytes: 500 * GB, freeBytes: 400 * GB, entries: [] },
    state: 'healthy',
    cordoned: false,
    ...over,
  };
}

function replica(id: string, model: string, nodeId: string, gpuIndices: number[], state: Replica['state'] = 'ready'): Replica {
  return { id, model, profileIndex: 0, engine: 'vllm', members: [{ nodeId, rank: 0, gpuIndices }], state, restarts: 0, createdAt: 1, updatedAt: 1 };
}

function gpuModel(name: string, replicas: number | { min: number; max: number }, gpusPerNode = 1): Record<string, unknown> {
  return { name, source: `https://h/${name}.bin`, size: '1GB', replicas, profiles: [{ engine: 'vllm', gpuClass: 'L4', gpusPerNode, tensorParallel: gpusPerNode }] };
}

describe('previewPlacement', () => {
  it('places missing replicas in catalog order, each taking its GPUs before the next', () => {
    const catalog = Catalog.create({ models: [gpuModel('a', 2), gpuModel('b', 1, 2)] });
    const preview = previewPlacement(catalog, [node('n1', 2), node('n2', 1)], []);
    expect(preview.nodes).toBe(2);
    const [a, b] = preview.models;
    expect(a).toMatchObject({ model: 'a', wanted: 2, existing: 0, outcome: 'fits' });
    expect(a.placements.map((p) => p.members[0].nodeId).sort()).toEqual(['n1', 'n2']);
    // Only one L4 is left on n1 and none on n2: b (2 GPUs) fits nowhere, and says why per node.
    expect(b).toMatchObject({ model: 'b', wanted: 1, outcome: 'unplaceable', placements: [] });
    expect(b.unplaceable?.summary).toMatch(/^model b: no profile fits/);
    expect(b.unplaceable?.reasons.map((r) => r.nodeId).sort()).toEqual(['n1', 'n2']);
  });

  it('keeps the GPUs of replicas the candidate keeps, and frees those of models it drops', () => {
    const catalog = Catalog.create({ models: [gpuModel('kept', 1), gpuModel('new', 1)] });
    const replicas = [replica('r1', 'kept', 'n1', [0]), replica('r2', 'dropped', 'n1', [1]), replica('r3', 'kept', 'n1', [1], 'failed')];
    const preview = previewPlacement(catalog, [node('n1', 2)], replicas);
    expect(preview.models[0]).toMatchObject({ model: 'kept', existing: 1, outcome: 'satisfied', placements: [] });
    expect(preview.models[1]).toMatchObject({ model: 'new', outcome: 'fits', placements: [{ profileIndex: 0, profile: 'vllm 1×L4', members: [{ nodeId: 'n1', gpuIndices: [1] }] }] });
  });

  it('reports partial fits, and for a model scaled to zero whether a first replica would fit without taking its room', () => {
    const catalog = Catalog.create({ models: [gpuModel('zero', 0), gpuModel('three', 3)] });
    const preview = previewPlacement(catalog, [node('n1', 2)], []);
    expect(preview.models[0]).toMatchObject({ model: 'zero', wanted: 0, outcome: 'satisfied', placements: [{ members: [{ nodeId: 'n1' }] }] });
    expect(preview.models[1]).toMatchObject({ model: 'three', outcome: 'partial' });
    expect(preview.models[1].placements).toHaveLength(2);
    expect(preview.models[1].unplaceable?.summary).toContain('model three');
  });

  it('skips cordoned and lost nodes with a reason, and stops at the preview cap', () => {
    const catalog = Catalog.create({
      models: [gpuModel('g', 1), { name: 'cpu', source: 'https://h/c.gguf', size: 1, replicas: PREVIEW_MAX_REPLICAS_PER_MODEL + 5, profiles: [{ engine: 'llamacpp' }] }],
    });
    const preview = previewPlacement(catalog, [node('c', 2, { cordoned: true }), node('l', 2, { state: 'lost' }), node('cpu-only', 0, { cpuCores: 128 })], []);
    expect(preview.models[0].outcome).toBe('unplaceable');
    expect(preview.models[0].unplaceable?.reasons.map((r) => r.nodeId).sort()).toEqual(['c', 'cpu-only', 'l']);
    expect(preview.models[1]).toMatchObject({ outcome: 'fits', truncated: true });
    expect(preview.models[1].placements).toHaveLength(PREVIEW_MAX_REPLICAS_PER_MODEL);
  });

  it('says every model is unplaceable on an empty inventory', () => {
    const preview = previewPlacement(Catalog.create({ models: [gpuModel('a', 1)] }), [], []);
    expect(preview).toEqual({
      nodes: 0,
      models: [expect.objectContaining({ outcome: 'unplaceable', unplaceable: expect.objectContaining({ reasons: [{ profileIndex: 0, reason: 'no nodes in inventory' }] }) })],
    });
  });
});
