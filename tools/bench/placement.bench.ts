// Placement benchmark: 2,000 nodes × 8 GPUs with 1,000 replicas already placed, then the time of
// one more placement (target: median ≤ 1 ms) through a PlacementIndex and through plain place(),
// against the cost of building the index and a naive scan, all measured in the same run.
// Usage: node tools/run.cjs tools/bench/placement.bench.ts [--calls N] [--no-write]
// Writes its section of docs/benchmarks.md unless --no-write.
import type { Gpu, Model, NodeInfo, Profile } from '@llmgw/domain';
import {
  capacityByClass,
  freeNodesByFabric,
  place,
  PlacementIndex,
  type Inventory,
  type PlacementRequest,
} from '@llmgw/placement';
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import { machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const GB = 1e9;
const NODES = 2000;
const GPUS_PER_NODE = 8;
const REPLICAS = 1000;
const FABRIC_SIZE = 100;

/** Deterministic pseudo-random numbers (mulberry32): the same fleet on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** 2,000 nodes: 60% H100, 30% A100, 10% L40S; 20 fabrics of 100; ~1% cordoned or unreachable; ~0.5% bad GPUs. */
function buildFleet(): NodeInfo[] {
  const r = rng(42);
  const nodes: NodeInfo[] = [];
  for (let i = 0; i < NODES; i++) {
    const id = `node-${String(i).padStart(4, '0')}`;
    const x = r();
    const gpuClass = x < 0.6 ? 'H100-80GB' : x < 0.9 ? 'A100-80GB' : 'L40S-48GB';
    const memory = gpuClass === 'L40S-48GB' ? 48 * GB : 80 * GB;
    const gpus: Gpu[] = [];
    for (let g = 0; g < GPUS_PER_NODE; g++) {
      gpus.push({
        index: g,
        uuid: `GPU-${i}-${g}`,
        name: gpuClass,
        gpuClass,
        memoryTotalBytes: memory,
        memoryUsedBytes: Math.floor(r() * 2) * GB,
        healthy: r() > 0.005,
      });
    }
    const s = r();
    nodes.push({
      id,
      address: `10.0.${i >> 8}.${i & 255}`,
      labels: {},
      fabric: `ib-${String(Math.floor(i / FABRIC_SIZE)).padStart(2, '0')}`,
      gpus,
      cpuCores: 96,
      memoryBytes: 1024 * GB,
      cache: { dir: '/var/lib/llmgw/cache', totalBytes: 2000 * GB, freeBytes: (200 + Math.floor(r() * 1500)) * GB, entries: [] },
      state: s < 0.005 ? 'unreachable' : 'healthy',
      cordoned: s > 0.995,
    });
  }
  // Node order carries no meaning: shuffle so nothing benefits from id order.
  for (let i = nodes.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [nodes[i], nodes[j]] = [nodes[j], nodes[i]];
  }
  return nodes;
}

function profile(engine: Profile['engine'], gpuClass: string | undefined, gpusPerNode: number, nodes = 1, memoryPerGpuBytes = 0): Profile {
  return {
    engine,
    ...(gpuClass ? { gpuClass } : {}),
    gpusPerNode,
    nodes,
    tensorParallel: Math.max(1, gpusPerNode),
    pipelineParallel: nodes,
    memoryPerGpuBytes,
    memoryBytes: gpuClass ? 0 : 16 * GB,
    args: [],
    env: {},
  };
}

function model(name: string, sizeGb: number, profiles: Profile[]): PlacementRequest {
  const m: Model = {
    name,
    aliases: [],
    source: `hf://org/${name}@main`,
    sizeBytes: sizeGb * GB,
    replicas: { min: 1, max: 100 },
    profiles,
  };
  return { model: m, cacheName: `llmgw-bench-${name}` };
}

/** A catalog mixing 1/2/4/8-GPU, fallback, multi-node and CPU profiles. */
const REQUESTS: PlacementRequest[] = [
  model('llama-8b', 16, [profile('vllm', 'H100-80GB', 1, 1, 40 * GB), profile('vllm', 'A100-80GB', 1, 1, 40 * GB)]),
  model('qwen-14b', 28, [profile('vllm', 'A100-80GB', 2, 1, 60 * GB), profile('vllm', 'H100-80GB', 2)]),
  model('mixtral-8x7b', 90, [profile('vllm', 'H100-80GB', 4, 1, 70 * GB)]),
  model('llama-70b', 140, [profile('vllm', 'H100-80GB', 8), profile('vllm', 'A100-80GB', 8)]),
  model('llama-405b', 800, [profile('vllm', 'H100-80GB', 8, 2)]),
  model('embed-small', 1, [profile('vllm', 'L40S-48GB', 1), profile('llamacpp', undefined, 0)]),
  model('phi-cpu', 3, [profile('llamacpp', undefined, 0)]),
  model('gemma-9b', 18, [profile('vllm', 'L40S-48GB', 2, 1, 30 * GB), profile('vllm', 'A100-80GB', 1)]),
];

/** What place() would be without an allocation index: every GPU looks itself up in the allocation list. */
function naivePlaceSingleGpu(req: PlacementRequest, inv: Inventory): string | undefined {
  for (const p of req.model.profiles) {
    if (p.gpuClass === undefined || p.nodes > 1) continue;
    let best: { id: string; ofModel: number; freeAfter: number; holds: boolean } | undefined;
    for (const n of inv.nodes) {
      if (n.state !== 'healthy' || n.cordoned) continue;
      let fitting = 0;
      let freeAny = 0;
      for (const g of n.gpus) {
        const taken = inv.allocations.some((a) => a.nodeId === n.id && a.gpuIndices.includes(g.index));
        if (g.healthy && !taken) freeAny++;
        if (g.gpuClass === p.gpuClass && g.healthy && !taken && g.memoryTotalBytes - (g.memoryUsedBytes ?? 0) >= p.memoryPerGpuBytes) fitting++;
      }
      if (fitting < p.gpusPerNode) continue;
      const holds = n.cache.entries.some((e) => e.name === req.cacheName);
      if (!holds && n.cache.freeBytes < req.model.sizeBytes) continue;
      const ofModel = inv.allocations.filter((a) => a.nodeId === n.id && a.model === req.model.name).length;
      const c = { id: n.id, ofModel, freeAfter: freeAny - p.gpusPerNode, holds };
      if (
        !best ||
        c.ofModel < best.ofModel ||
        (c.ofModel === best.ofModel && c.freeAfter < best.freeAfter) ||
        (c.ofModel === best.ofModel && c.freeAfter === best.freeAfter && (c.holds && !best.holds || (c.holds === best.holds && c.id < best.id)))
      ) {
        best = c;
      }
    }
    if (best) return best.id;
  }
  return undefined;
}

interface Timing {
  samples: number[];
  /** Process CPU time per call (all threads, GC included), ms: what the call costs when not waiting for a core. */
  cpuMs: number;
}

/** Times `calls` calls one by one (wall clock, ms) after `warm` untimed ones. */
function timeCalls(calls: number, fn: (i: number) => unknown, warm = Math.min(200, calls)): Timing {
  for (let i = 0; i < warm; i++) fn(i);
  const samples: number[] = new Array(calls);
  const c0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    fn(i);
    samples[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  const c = process.cpuUsage(c0);
  return { samples, cpuMs: (c.user + c.system) / 1000 / calls };
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

function ms(x: number): string {
  return x < 0.1 ? x.toFixed(4) : x < 10 ? x.toFixed(3) : x.toFixed(1);
}

function main(): void {
  const { values } = parseArgs({
    options: { calls: { type: 'string', default: '5000' }, 'no-write': { type: 'boolean', default: false } },
  });
  const calls = Number(values.calls);
  if (!Number.isInteger(calls) || calls < 100) throw new Error(`--calls must be an integer ≥ 100, got ${values.calls}`);
  const load0 = os.loadavg()[0];
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const mem0 = process.memoryUsage();

  // 1. The fleet, then 1,000 replicas placed in sequence through an index, as a reconciler would.
  const nodes = buildFleet();
  let index = PlacementIndex.build({ nodes, allocations: [] });
  let placed = 0;
  let refused = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; placed < REPLICAS; i++) {
    const req = REQUESTS[i % REQUESTS.length];
    const r = index.place(req);
    if (r.ok) {
      index = index.withAllocation(`r-${i}`, req, r);
      placed++;
    } else if (++refused > REPLICAS) {
      throw new Error(`fleet too small for the benchmark: ${r.summary}`);
    }
  }
  const seqMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const final = index.inventory;
  gc?.();
  const mem1 = process.memoryUsage();

  // 2. Both paths must agree before either is timed.
  const impossible = model('nowhere', 10, [profile('vllm', 'B200-192GB', 8), profile('vllm', 'H100-80GB', 8, 80)]);
  for (const req of [...REQUESTS, impossible]) {
    if (JSON.stringify(place(req, final)) !== JSON.stringify(index.place(req))) {
      throw new Error(`place() and PlacementIndex disagree for ${req.model.name}`);
    }
  }
  const gpuSingle = REQUESTS.filter((r) => r.model.profiles.some((p) => p.gpuClass !== undefined && p.nodes === 1));
  for (const req of gpuSingle) {
    const r = index.place(req);
    const mine = r.ok && r.members.length === 1 ? r.members[0].nodeId : undefined;
    const naive = naivePlaceSingleGpu(req, final);
    if (naive !== mine) throw new Error(`naive scan disagrees for ${req.model.name}: ${naive} vs ${mine}`);
  }
  const still = REQUESTS.filter((req) => index.place(req).ok).length;
  const failResult = index.place(impossible);
  const sample = index.place(REQUESTS[0]);

  // 3. Timings, the target row first.
  const pick = (i: number) => REQUESTS[i % REQUESTS.length];
  const tIndex = timeCalls(calls, (i) => index.place(pick(i)));
  const tPlain = timeCalls(Math.ceil(calls / 5), (i) => place(pick(i), final));
  const tBuild = timeCalls(Math.ceil(calls / 25), () => PlacementIndex.build(final));
  const tApply = timeCalls(Math.ceil(calls / 5), (i) => index.withAllocation(`bench-${i}`, REQUESTS[0], sample));
  const tFail = timeCalls(Math.ceil(calls / 50), () => index.place(impossible), 10);
  const tSingle = timeCalls(calls, (i) => index.place(gpuSingle[i % gpuSingle.length]));
  const tNaive = timeCalls(Math.max(5, Math.ceil(calls / 250)), (i) => naivePlaceSingleGpu(gpuSingle[i % gpuSingle.length], final), 2);
  const tCap = timeCalls(Math.ceil(calls / 25), () => {
    capacityByClass(final);
    freeNodesByFabric(final);
  });
  gc?.();
  const mem2 = process.memoryUsage();
  const load1 = os.loadavg()[0];

  const target = percentile(tIndex.samples, 50);
  const row = (name: string, t: Timing, vs: number, vsLabel = '') => {
    const median = percentile(t.samples, 50);
    return [name, String(t.samples.length), ms(median), ms(percentile(t.samples, 99)), ms(t.cpuMs), `${(median / vs).toFixed(vs === target ? 2 : 1)}×${vsLabel}`];
  };
  const singleMedian = percentile(tSingle.samples, 50);
  const rows: string[][] = [
    ['case', 'calls', 'median ms', 'p99 ms', 'CPU ms/call', 'ratio'],
    row('index.place(): one more replica, 8-model mix', tIndex, target),
    row('place(request, inventory): same, no index', tPlain, target),
    row('PlacementIndex.build(inventory)', tBuild, target),
    row('index.withAllocation(): one replica', tApply, target),
    row('index.place(): unplaceable, every reason', tFail, target),
    row('index.place(): single-node GPU models only', tSingle, target),
    row('baseline: naive scan, single-node GPU models', tNaive, singleMedian, ' the row above'),
    row('capacityByClass + freeNodesByFabric', tCap, target),
  ];
  const memRows: string[][] = [
    ['memory', 'heap used', 'RSS'],
    ['before the fleet', mib(mem0.heapUsed), mib(mem0.rss)],
    [`fleet + ${REPLICAS} replicas + index (${final.allocations.length} allocations)`, mib(mem1.heapUsed), mib(mem1.rss)],
    ['after the timed calls', mib(mem2.heapUsed), mib(mem2.rss)],
  ];
  const cap = capacityByClass(final)
    .map((c) => `${c.gpuClass} ${c.used}/${c.total} used, ${c.free} free, ${c.unhealthy} unhealthy, ${c.unavailable} unavailable`)
    .join('; ');
  const freeWhole = freeNodesByFabric(final).reduce((s, f) => s + f.freeNodes, 0);
  const plainMedian = percentile(tPlain.samples, 50);
  const lines = [
    `Fleet: ${NODES} nodes × ${GPUS_PER_NODE} GPUs (${NODES / FABRIC_SIZE} fabrics of ${FABRIC_SIZE}); ${REPLICAS} replicas placed in sequence ` +
      `through one index in ${seqMs.toFixed(0)} ms (${(seqMs / (placed + refused)).toFixed(3)} ms per place + withAllocation; ${refused} refused).`,
    `After: ${cap}; ${freeWhole} free whole nodes.`,
    `Timed requests: ${still} of ${REQUESTS.length} models still fit; the unplaceable one reports ` +
      `${failResult.ok ? 0 : failResult.reasons.length} reasons. place() and the index agree on all of them, and the naive scan on the single-node GPU ones.`,
    `Target median place() ≤ 1 ms: index.place() ${ms(target)} ms — ${target <= 1 ? 'met' : 'MISSED'}; ` +
      `place(request, inventory) without an index ${ms(plainMedian)} ms — ${plainMedian <= 1 ? 'met' : 'missed'}.`,
    `Load average (1 min) ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end: wall-clock figures include waiting for a core; CPU ms/call does not.`,
  ];
  const machine = machineLine(os.cpus(), os.totalmem());
  printTable(rows);
  printTable(memRows);
  for (const l of lines) process.stdout.write(`${l}\n`);
  process.stdout.write(`machine: ${machine}\n`);

  if (!values['no-write']) {
    const md = [
      'Command: `npm run bench:placement` (= `node tools/run.cjs tools/bench/placement.bench.ts`; run it as',
      '`node --expose-gc tools/run.cjs tools/bench/placement.bench.ts` for steadier memory figures).',
      '',
      `Machine: ${machine}${gc ? '' : '; run without --expose-gc, so memory figures include garbage'}.`,
      '',
      ...lines.map((l) => `- ${l}`),
      '',
      markdownTable(rows),
      '',
      markdownTable(memRows),
      '',
      'Ratios are against the first row unless stated. `place(request, inventory)` reads the',
      'inventory directly each call (allocations indexed by node once, then every GPU of every',
      'node); a `PlacementIndex` precomputes per node and class the free GPUs and their free',
      'memory, so a check is a lookup, and `withAllocation` recomputes only the member nodes.',
      'The naive baseline applies the same single-node GPU rules but finds each GPU\'s allocation',
      'by scanning the allocation list.',
    ];
    const file = writeSection('placement', 'Placement', md.join('\n'));
    process.stdout.write(`wrote the placement section of ${file}\n`);
  }
}

main();
