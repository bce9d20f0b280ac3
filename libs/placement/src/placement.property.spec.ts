import type { Gpu, Model, NodeInfo, Profile } from '@llmgw/domain';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { withAllocation } from './allocation.reducer';
import { place, PlacementIndex } from './placement.index';
import type { Inventory, PlacementRequest, PlacementResult } from './placement.types';
import { cpuProfile, GB, gpuProfile } from './test/fleet.builder';

// ---- generators: small random fleets and catalogs, so shrinking finds small counterexamples ----

const CLASSES = ['H100', 'A100'];
const CACHE_NAMES = ['c-0', 'c-1', 'c-2', 'c-3'];

// Nodes look alike on purpose (same GPU counts, mostly one class) so tie-breaks are exercised.
const nodeArb = fc.record({
  state: fc.constantFrom('healthy', 'healthy', 'healthy', 'unreachable', 'lost') as fc.Arbitrary<NodeInfo['state']>,
  cordoned: fc.integer({ min: 0, max: 5 }).map((n) => n === 0),
  fabric: fc.constantFrom(undefined, 'f1', 'f1', 'f2'),
  gpuCount: fc.constantFrom(0, 2, 4, 8, 8),
  gpuClass: fc.constantFrom(...CLASSES),
  /** 0 = odd GPUs are of the other class. */
  mixed: fc.integer({ min: 0, max: 4 }),
  unhealthy: fc.array(fc.nat(7), { maxLength: 2 }),
  used: fc.array(fc.constantFrom(undefined, undefined, undefined, 0, 30 * GB, 79 * GB), { minLength: 8, maxLength: 8 }),
  memoryGb: fc.integer({ min: 8, max: 256 }),
  /** 0 = the node did not say. */
  cpuCores: fc.constantFrom(0, 1, 2, 4, 16, 16),
  cacheFreeGb: fc.integer({ min: 0, max: 120 }),
  cached: fc.subarray(CACHE_NAMES),
});

type ValueOf<A> = A extends fc.Arbitrary<infer T> ? T : never;

function buildNode(id: string, n: ValueOf<typeof nodeArb>): NodeInfo {
  const other = CLASSES.find((c) => c !== n.gpuClass) as string;
  return {
    id,
    address: id,
    labels: {},
    fabric: n.fabric,
    gpus: Array.from({ length: n.gpuCount }, (_, index): Gpu => {
      const gpuClass = n.mixed === 0 && index % 2 === 1 ? other : n.gpuClass;
      const used = n.used[index];
      return {
        index,
        uuid: `${id}-${index}`,
        name: gpuClass,
        gpuClass,
        memoryTotalBytes: 80 * GB,
        ...(used !== undefined ? { memoryUsedBytes: used } : {}),
        healthy: !n.unhealthy.includes(index),
      };
    }),
    cpuCores: n.cpuCores,
    memoryBytes: n.memoryGb * GB,
    cache: {
      dir: '/cache',
      totalBytes: 1000 * GB,
      freeBytes: n.cacheFreeGb * GB,
      entries: n.cached.map((name) => ({ name, sizeBytes: GB, modifiedAt: 1 })),
    },
    state: n.state,
    cordoned: n.cordoned,
  };
}

const idsArb = fc.uniqueArray(fc.integer({ min: 0, max: 99 }), { minLength: 2, maxLength: 12 });
const fleetArb = fc.oneof(
  // Every node different.
  idsArb.chain((ids) => fc.tuple(...ids.map(() => nodeArb)).map((specs) => specs.map((s, i) => buildNode(`n${ids[i]}`, s)))),
  // Identical nodes, so every choice comes down to the tie-breaks.
  fc.tuple(idsArb, nodeArb).map(([ids, spec]) => ids.map((id) => buildNode(`n${id}`, spec))),
);

const profileArb: fc.Arbitrary<Profile> = fc.oneof(
  fc
    .record({
      gpuClass: fc.constantFrom(...CLASSES),
      gpusPerNode: fc.constantFrom(1, 2, 4, 8),
      nodes: fc.constantFrom(1, 2, 3),
      memoryPerGpuGb: fc.constantFrom(0, 20, 50, 60),
      memoryGb: fc.constantFrom(0, 0, 16),
    })
    .map((p) =>
      gpuProfile(p.gpuClass, p.gpusPerNode, {
        nodes: p.nodes,
        memoryPerGpuBytes: p.memoryPerGpuGb * GB,
        memoryBytes: p.memoryGb * GB,
      }),
    ),
  fc.constantFrom(0, 8, 32).map((gb) => cpuProfile({ memoryBytes: gb * GB })),
);

const modelArb = fc.record({
  profiles: fc.array(profileArb, { minLength: 1, maxLength: 3 }),
  sizeGb: fc.integer({ min: 1, max: 60 }),
  cacheName: fc.constantFrom(undefined, ...CACHE_NAMES),
});

const catalogArb = fc.array(modelArb, { minLength: 1, maxLength: 4 }).map((ms) =>
  ms.map((m, i) => ({
    model: {
      name: `m${i}`,
      aliases: [],
      source: m.cacheName ? `hf://org/m${i}@main` : `file:///models/m${i}`,
      sizeBytes: m.sizeGb * GB,
      replicas: { min: 1, max: 1 },
      profiles: m.profiles,
    } satisfies Model,
    // Distinct models share a cache name only when they share a source: keep them apart.
    cacheName: m.cacheName ? `${m.cacheName}-m${i}` : undefined,
  })),
);

const scenarioArb = fc.record({
  fleet: fleetArb,
  catalog: catalogArb,
  order: fc.array(fc.nat(), { minLength: 4, maxLength: 25 }),
  seed: fc.integer(),
});

/** The same, leaning on multi-node: nodes up, mostly in a fabric; GPU profiles span 2-3 nodes. */
const multiNodeScenarioArb = scenarioArb.map((s) => ({
  ...s,
  fleet: s.fleet.map((n, i) => ({
    ...n,
    state: i % 5 === 4 ? n.state : ('healthy' as const),
    cordoned: i % 5 === 4 ? n.cordoned : false,
    fabric: i % 4 === 3 ? n.fabric : (n.fabric ?? 'f3'),
  })),
  catalog: s.catalog.map((c) => ({
    ...c,
    model: { ...c.model, profiles: c.model.profiles.map((p) => (p.gpuClass ? { ...p, nodes: Math.max(2, p.nodes) } : p)) },
  })),
}));

const anyScenarioArb = fc.oneof(scenarioArb, multiNodeScenarioArb);

// ---- oracle: a naive re-statement of the fit rules, used to check completeness ----

/** Host memory a replica reserves: what the profile states, else a CPU replica's weights. */
function naiveMemoryNeed(req: PlacementRequest, p: Profile): number {
  if (p.memoryBytes > 0) return p.memoryBytes;
  return p.gpuClass === undefined ? req.model.sizeBytes : 0;
}

function naiveNodeFits(node: NodeInfo, inv: Inventory, req: PlacementRequest, p: Profile): boolean {
  if (node.state !== 'healthy' || node.cordoned) return false;
  const mine = inv.allocations.filter((a) => a.nodeId === node.id);
  const usedMem = mine.reduce((s, a) => s + (a.memoryBytes ?? 0), 0);
  const need = naiveMemoryNeed(req, p);
  if (need > 0 && node.memoryBytes - usedMem < need) return false;
  if (p.gpuClass === undefined && node.cpuCores > 0 && mine.filter((a) => a.gpuIndices.length === 0).length >= node.cpuCores) return false;
  const holds = req.cacheName !== undefined && node.cache.entries.some((e) => e.name === req.cacheName);
  if (req.cacheName !== undefined && !holds && node.cache.freeBytes < req.model.sizeBytes) return false;
  if (p.gpuClass === undefined) return true;
  const fitting = node.gpus.filter(
    (g) =>
      g.gpuClass === p.gpuClass &&
      g.healthy &&
      !mine.some((a) => a.gpuIndices.includes(g.index)) &&
      g.memoryTotalBytes - (g.memoryUsedBytes ?? 0) >= p.memoryPerGpuBytes,
  );
  return fitting.length >= p.gpusPerNode;
}

function naiveProfileFits(inv: Inventory, req: PlacementRequest, p: Profile): boolean {
  if (p.gpuClass === undefined && p.nodes > 1) return false;
  const fits = inv.nodes.filter((n) => naiveNodeFits(n, inv, req, p));
  if (p.nodes <= 1) return fits.length > 0;
  const perFabric = new Map<string, number>();
  for (const n of fits) if (n.fabric !== undefined) perFabric.set(n.fabric, (perFabric.get(n.fabric) ?? 0) + 1);
  return [...perFabric.values()].some((k) => k >= p.nodes);
}

// ---- helpers ----

function shuffle<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

interface Step {
  req: PlacementRequest;
  before: Inventory;
  result: PlacementResult;
}

/** Places models in the generated order, one replica each step, threading the inventory. */
function run(s: ValueOf<typeof anyScenarioArb>): { steps: Step[]; last: Inventory } {
  let inv: Inventory = { nodes: s.fleet, allocations: [] };
  const steps: Step[] = [];
  s.order.forEach((k, i) => {
    const req = s.catalog[k % s.catalog.length];
    const result = place(req, inv);
    steps.push({ req, before: inv, result });
    inv = withAllocation(inv, `r${i}`, req, result);
  });
  return { steps, last: inv };
}

const byId = (inv: Inventory) => new Map(inv.nodes.map((n) => [n.id, n]));

describe('place: invariants over random fleets', () => {
  it('never allocates a GPU twice, and only healthy, matching, roomy GPUs on placeable nodes', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        const { steps, last } = run(s);
        const seen = new Set<string>();
        for (const a of last.allocations) {
          for (const g of a.gpuIndices) {
            const key = `${a.nodeId}/${g}`;
            expect(seen.has(key), `GPU ${key} allocated twice`).toBe(false);
            seen.add(key);
          }
        }
        for (const { req, before, result } of steps) {
          if (!result.ok) continue;
          const p = req.model.profiles[result.profileIndex];
          const nodes = byId(before);
          for (const m of result.members) {
            const n = nodes.get(m.nodeId) as NodeInfo;
            expect(n.state).toBe('healthy');
            expect(n.cordoned).toBe(false);
            expect(m.gpuIndices).toHaveLength(p.gpuClass === undefined ? 0 : p.gpusPerNode);
            for (const idx of m.gpuIndices) {
              const g = n.gpus.find((x) => x.index === idx) as Gpu;
              expect(g.healthy).toBe(true);
              expect(g.gpuClass).toBe(p.gpuClass);
              expect(g.memoryTotalBytes - (g.memoryUsedBytes ?? 0)).toBeGreaterThanOrEqual(p.memoryPerGpuBytes);
            }
          }
        }
      }),
    );
  });

  it('never spans fabrics: a multi-node replica uses distinct nodes of one fabric', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        for (const { req, before, result } of run(s).steps) {
          if (!result.ok) continue;
          const p = req.model.profiles[result.profileIndex];
          expect(result.members.map((m) => m.rank)).toEqual(result.members.map((_, i) => i));
          if (p.nodes <= 1) {
            expect(result.members).toHaveLength(1);
            continue;
          }
          const nodes = byId(before);
          const fabrics = new Set(result.members.map((m) => nodes.get(m.nodeId)?.fabric));
          expect(result.members).toHaveLength(p.nodes);
          expect(new Set(result.members.map((m) => m.nodeId)).size).toBe(p.nodes);
          expect(fabrics.size).toBe(1);
          expect([...fabrics][0]).toBeDefined();
        }
      }),
    );
  });

  it('never overfills a disk or host memory', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        const { last } = run(s);
        const fetched = new Map<string, Map<string, number>>();
        for (const n of s.fleet) fetched.set(n.id, new Map());
        // Recompute what each node must fetch from the allocations alone, not from the reducer.
        for (const a of last.allocations) {
          const req = s.catalog.find((c) => c.model.name === a.model);
          if (!req?.cacheName) continue;
          const orig = s.fleet.find((n) => n.id === a.nodeId) as NodeInfo;
          if (orig.cache.entries.some((e) => e.name === req.cacheName)) continue;
          fetched.get(a.nodeId)?.set(req.cacheName, req.model.sizeBytes);
        }
        for (const n of s.fleet) {
          const need = [...(fetched.get(n.id) as Map<string, number>).values()].reduce((x, y) => x + y, 0);
          expect(need).toBeLessThanOrEqual(n.cache.freeBytes);
          const mem = last.allocations.filter((a) => a.nodeId === n.id).reduce((x, a) => x + (a.memoryBytes ?? 0), 0);
          expect(mem).toBeLessThanOrEqual(n.memoryBytes);
        }
      }),
    );
  });

  it('never over-allocates a node: GPUs, host memory and CPU cores, recomputed from the placements alone', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        const gpus = new Map<string, number>();
        const memory = new Map<string, number>();
        const cpu = new Map<string, number>();
        for (const { req, result } of run(s).steps) {
          if (!result.ok) continue;
          const p = req.model.profiles[result.profileIndex];
          for (const m of result.members) {
            gpus.set(m.nodeId, (gpus.get(m.nodeId) ?? 0) + m.gpuIndices.length);
            memory.set(m.nodeId, (memory.get(m.nodeId) ?? 0) + naiveMemoryNeed(req, p));
            if (p.gpuClass === undefined) cpu.set(m.nodeId, (cpu.get(m.nodeId) ?? 0) + 1);
          }
        }
        for (const n of s.fleet) {
          expect(gpus.get(n.id) ?? 0, `GPUs on ${n.id}`).toBeLessThanOrEqual(n.gpus.filter((g) => g.healthy).length);
          expect(memory.get(n.id) ?? 0, `memory on ${n.id}`).toBeLessThanOrEqual(n.memoryBytes);
          if (n.cpuCores > 0) expect(cpu.get(n.id) ?? 0, `CPU replicas on ${n.id}`).toBeLessThanOrEqual(n.cpuCores);
        }
      }),
    );
  });

  it('is deterministic: shuffling nodes and allocations changes nothing, reasons included', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        for (const { req, before, result } of run(s).steps) {
          const shuffled: Inventory = {
            nodes: shuffle(before.nodes, s.seed),
            allocations: shuffle(before.allocations, s.seed + 1),
          };
          expect(place(req, shuffled)).toEqual(result);
          expect(place(req, before)).toEqual(result);
        }
      }),
    );
  });

  it('an index updated replica by replica agrees with place() on the plain inventory', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        let index = PlacementIndex.build({ nodes: s.fleet, allocations: [] });
        const { steps, last } = run(s);
        steps.forEach(({ req, result }, i) => {
          expect(index.place(req)).toEqual(result);
          index = index.withAllocation(`r${i}`, req, result);
        });
        expect(index.inventory).toEqual(last);
      }),
    );
  });

  it('places whenever some profile fits, on the first profile that fits', () => {
    fc.assert(
      fc.property(anyScenarioArb, (s) => {
        for (const { req, before, result } of run(s).steps) {
          const first = req.model.profiles.findIndex((p) => naiveProfileFits(before, req, p));
          if (first < 0) {
            expect(result.ok).toBe(false);
            if (!result.ok) expect(result.reasons.length).toBeGreaterThan(0);
          } else {
            expect(result.ok && result.profileIndex).toBe(first);
          }
        }
      }),
    );
  });
});

describe('place: CPU replicas spread', () => {
  const cpuFleetArb = fc
    .uniqueArray(fc.integer({ min: 0, max: 99 }), { minLength: 1, maxLength: 10 })
    .chain((ids) =>
      fc.tuple(
        ...ids.map((id) =>
          fc.record({
            id: fc.constant(`n${id}`),
            state: fc.constantFrom('healthy', 'healthy', 'unreachable', 'lost') as fc.Arbitrary<NodeInfo['state']>,
            cordoned: fc.boolean(),
            memoryGb: fc.integer({ min: 1, max: 512 }),
            gpus: fc.integer({ min: 0, max: 8 }),
          }),
        ),
      ),
    );

  it('keeps each model within one replica of even across eligible nodes', () => {
    fc.assert(
      fc.property(cpuFleetArb, fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }), fc.integer(), (specs, order, seed) => {
        const nodes: NodeInfo[] = specs.map((n) => ({
          id: n.id,
          address: n.id,
          labels: {},
          gpus: Array.from({ length: n.gpus }, (_, index) => ({
            index,
            uuid: `${n.id}-${index}`,
            name: 'H100',
            gpuClass: 'H100',
            memoryTotalBytes: 80 * GB,
            healthy: true,
          })),
          // Room for every replica: only the spread is under test here.
          cpuCores: 64,
          memoryBytes: n.memoryGb * GB,
          cache: { dir: '/c', totalBytes: 0, freeBytes: 0, entries: [] },
          state: n.state,
          cordoned: n.cordoned,
        }));
        const models = ['a', 'b'].map((name) => ({
          model: { name, aliases: [], source: `file:///${name}`, sizeBytes: GB / 100, replicas: { min: 1, max: 1 }, profiles: [cpuProfile()] },
        }));
        let inv: Inventory = { nodes: shuffle(nodes, seed), allocations: [] };
        order.forEach((pickA, i) => {
          const req = models[pickA ? 0 : 1];
          inv = withAllocation(inv, `r${i}`, req, place(req, inv));
        });
        const eligible = nodes.filter((n) => n.state === 'healthy' && !n.cordoned).map((n) => n.id);
        for (const { model } of models) {
          const counts = new Map(eligible.map((id) => [id, 0]));
          for (const a of inv.allocations) {
            if (a.model !== model.name) continue;
            expect(counts.has(a.nodeId), `CPU replica on ineligible node ${a.nodeId}`).toBe(true);
            counts.set(a.nodeId, (counts.get(a.nodeId) as number) + 1);
          }
          if (eligible.length === 0) continue;
          const values = [...counts.values()];
          expect(Math.max(...values) - Math.min(...values)).toBeLessThanOrEqual(1);
        }
      }),
    );
  });
});

describe('place: GPU replicas of one model spread', () => {
  const singleGpuModelArb = fc.record({
    profiles: fc.array(
      fc
        .record({
          gpuClass: fc.constantFrom(...CLASSES),
          gpusPerNode: fc.constantFrom(1, 1, 2, 4),
          memoryPerGpuGb: fc.constantFrom(0, 20, 60),
          memoryGb: fc.constantFrom(0, 0, 64),
        })
        .map((p) => gpuProfile(p.gpuClass, p.gpusPerNode, { memoryPerGpuBytes: p.memoryPerGpuGb * GB, memoryBytes: p.memoryGb * GB })),
      { minLength: 1, maxLength: 2 },
    ),
    sizeGb: fc.integer({ min: 1, max: 60 }),
    cacheName: fc.constantFrom(undefined, ...CACHE_NAMES),
  });

  it('never stacks a replica on a node while a fitting node holds none of the model', () => {
    fc.assert(
      fc.property(fleetArb, singleGpuModelArb, fc.integer({ min: 2, max: 10 }), (fleet, m, k) => {
        const req: PlacementRequest = {
          model: {
            name: 'm',
            aliases: [],
            source: m.cacheName ? 'hf://org/m@main' : 'file:///models/m',
            sizeBytes: m.sizeGb * GB,
            replicas: { min: k, max: k },
            profiles: m.profiles,
          },
          cacheName: m.cacheName,
        };
        let inv: Inventory = { nodes: fleet, allocations: [] };
        let index = PlacementIndex.build(inv);
        for (let i = 0; i < k; i++) {
          const result = place(req, inv);
          expect(index.place(req)).toEqual(result);
          if (!result.ok) break;
          const p = req.model.profiles[result.profileIndex];
          const count = (id: string) => inv.allocations.filter((a) => a.nodeId === id && a.model === 'm').length;
          const chosen = count(result.members[0].nodeId);
          // The chosen node holds no more of the model than any node the profile fits on.
          for (const n of inv.nodes) {
            if (naiveNodeFits(n, inv, req, p)) expect(chosen, `${n.id} fits and holds fewer`).toBeLessThanOrEqual(count(n.id));
          }
          inv = withAllocation(inv, `r${i}`, req, result);
          index = index.withAllocation(`r${i}`, req, result);
        }
      }),
    );
  });
});
