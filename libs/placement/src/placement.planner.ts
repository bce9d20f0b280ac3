import type { NodeInfo, Profile, ReplicaMember } from '@llmgw/domain';
import { formatGb } from './bytes.format';
import type { FleetView, GpuFacts } from './fleet.view';
import { compareIds, countOf, type NodeUsage } from './node-usage.model';
import type { PlacementReason, PlacementRequest, PlacementResult } from './placement.types';
import { cpuReplicaLimit, hostMemoryOf } from './replica-footprint';

/** What one placement pass works from. */
interface Context {
  readonly request: PlacementRequest;
  readonly view: FleetView;
  /** Positions to visit in this order; absent = 0..size-1. */
  readonly order?: readonly number[];
  /** Set only on the second, reason-collecting pass. */
  readonly reasons?: PlacementReason[];
}

/** A node a GPU profile fits on. */
interface GpuCandidate {
  readonly at: number;
  readonly id: string;
  /** Allocations of the requested model already on the node. */
  readonly ofModel: number;
  /** Healthy unallocated GPUs (any class) the node would have left. */
  readonly freeAfter: number;
  /** The node already holds the weights. */
  readonly holds: boolean;
}

/**
 * Chooses where one replica goes: profiles in catalog order, the first that fits wins. Within a
 * profile, nodes holding the fewest replicas of the model come first (soft anti-affinity: losing
 * one node should not take every replica), then GPU bin-packing; ties end on node id, so the
 * view's order never changes the result. When nothing fits, runs again over
 * the nodes in id order collecting every profile's reasons. O(nodes × per-node check) per
 * profile tried.
 */
export function placeOnView(request: PlacementRequest, view: FleetView): PlacementResult {
  const ctx: Context = { request, view };
  const profiles = request.model.profiles;
  for (let i = 0; i < profiles.length; i++) {
    const members = tryProfile(ctx, profiles[i], i);
    if (members) return { ok: true, profileIndex: i, members };
  }
  // Second pass only on failure, so the common path builds no strings.
  const reasons: PlacementReason[] = [];
  const collecting: Context = { request, view, order: view.orderById(), reasons };
  for (let i = 0; i < profiles.length; i++) tryProfile(collecting, profiles[i], i);
  return { ok: false, reasons, summary: summarize(request, reasons) };
}

function tryProfile(ctx: Context, profile: Profile, profileIndex: number): ReplicaMember[] | undefined {
  if (ctx.view.size === 0) {
    ctx.reasons?.push({ profileIndex, reason: 'no nodes in inventory' });
    return undefined;
  }
  if (profile.gpuClass === undefined) return tryCpu(ctx, profile, profileIndex);
  return profile.nodes > 1 ? tryMultiNode(ctx, profile, profileIndex) : trySingleGpu(ctx, profile, profileIndex);
}

// ---- GPU profiles ----

function betterGpu(a: GpuCandidate, b: GpuCandidate): number {
  if (a.ofModel !== b.ofModel) return a.ofModel - b.ofModel;
  if (a.freeAfter !== b.freeAfter) return a.freeAfter - b.freeAfter;
  if (a.holds !== b.holds) return a.holds ? -1 : 1;
  return compareIds(a.id, b.id);
}

/**
 * GPU replicas spread, then bin-pack: among nodes that fit, the one holding the fewest replicas
 * of this model, then the one left with the fewest free GPUs, then weights held, then id. The
 * spread is soft: a node already holding the model still takes another when no other fits.
 */
function trySingleGpu(ctx: Context, profile: Profile, profileIndex: number): ReplicaMember[] | undefined {
  // Best so far in locals: the scan over every node allocates nothing.
  let best = -1;
  let bestId = '';
  let bestOfModel = 0;
  let bestFreeAfter = Infinity;
  let bestHolds = false;
  const name = ctx.request.model.name;
  const { view, order } = ctx;
  const n = order ? order.length : view.size;
  for (let k = 0; k < n; k++) {
    const i = order ? order[k] : k;
    const ofModel = countOf(view.usage(i), name);
    // More of this model than the best so far cannot win; fewer wins whatever it leaves free.
    // (The collecting pass never has a best, so it still visits every node.)
    if (best >= 0 && ofModel > bestOfModel) continue;
    const bound = best >= 0 && ofModel === bestOfModel ? bestFreeAfter : Infinity;
    const freeAfter = evalGpuNode(ctx, i, profile, profileIndex, false, bound);
    if (freeAfter < 0) continue;
    const holds = lastHolds;
    const id = view.node(i).id;
    if (
      best < 0 ||
      ofModel < bestOfModel ||
      freeAfter < bestFreeAfter ||
      (freeAfter === bestFreeAfter && (holds !== bestHolds ? holds : compareIds(id, bestId) < 0))
    ) {
      best = i;
      bestId = id;
      bestOfModel = ofModel;
      bestFreeAfter = freeAfter;
      bestHolds = holds;
    }
  }
  if (best < 0) return undefined;
  return [{ nodeId: bestId, rank: 0, gpuIndices: fittingIndices(view.node(best), view.usage(best), profile) }];
}

/**
 * m nodes of one fabric, never across fabrics; nodes without a fabric cannot take part. The
 * fabric is chosen by fitting nodes alone; within it, members follow the single-node order
 * (fewest replicas of this model first), so replicas avoid sharing nodes when the fabric allows.
 */
function tryMultiNode(ctx: Context, profile: Profile, profileIndex: number): ReplicaMember[] | undefined {
  // 1. Fitting nodes grouped by fabric.
  const byFabric = new Map<string, GpuCandidate[]>();
  const name = ctx.request.model.name;
  const { view, order } = ctx;
  const n = order ? order.length : view.size;
  for (let k = 0; k < n; k++) {
    const i = order ? order[k] : k;
    const freeAfter = evalGpuNode(ctx, i, profile, profileIndex, true, Infinity);
    if (freeAfter < 0) continue;
    const node = view.node(i);
    const c: GpuCandidate = { at: i, id: node.id, ofModel: countOf(view.usage(i), name), freeAfter, holds: lastHolds };
    const fabric = node.fabric as string;
    const list = byFabric.get(fabric);
    if (list) list.push(c);
    else byFabric.set(fabric, [c]);
  }
  // 2. The fabric with the fewest fitting nodes that still suffices keeps larger ones whole.
  const m = profile.nodes;
  let chosen: string | undefined;
  let chosenCount = Infinity;
  for (const [fabric, list] of byFabric) {
    if (list.length < m) continue;
    if (list.length < chosenCount || (list.length === chosenCount && compareIds(fabric, chosen as string) < 0)) {
      chosen = fabric;
      chosenCount = list.length;
    }
  }
  if (chosen === undefined) {
    if (ctx.reasons) {
      for (const f of [...byFabric.keys()].sort(compareIds)) {
        const k = (byFabric.get(f) as GpuCandidate[]).length;
        ctx.reasons.push({
          profileIndex,
          reason: `only ${k} ${k === 1 ? 'node' : 'nodes'} with ${freeGpus(profile.gpusPerNode)} in fabric ${f}, needs ${m}`,
        });
      }
    }
    return undefined;
  }
  // 3. Within it, the same order as a single node (spread, then bin-pack); rank 0 first.
  const picked = (byFabric.get(chosen) as GpuCandidate[]).sort(betterGpu).slice(0, m);
  return picked.map((c, rank) => ({
    nodeId: c.id,
    rank,
    gpuIndices: fittingIndices(view.node(c.at), view.usage(c.at), profile),
  }));
}

/** Reused by every check: the per-node loop allocates nothing. */
const facts: GpuFacts = { ofClass: 0, unhealthy: 0, free: 0, fitting: 0, freeAny: 0 };
/** Whether the node checked last by evalGpuNode holds the weights. */
let lastHolds = false;

/**
 * Checks the node at position i for a GPU profile. Returns the healthy unallocated GPUs (any
 * class) it would have left, with `lastHolds` set, or -1 when it does not fit (recording why
 * when collecting). Outside the collecting pass, a node that would leave more than `bound`
 * free is cut short: it cannot beat the best so far.
 */
function evalGpuNode(ctx: Context, i: number, profile: Profile, profileIndex: number, multiNode: boolean, bound: number): number {
  const node = ctx.view.node(i);
  if (node.state !== 'healthy' || node.cordoned) return reject(ctx, profileIndex, node, whyNotPlaceable(node));
  if (multiNode && node.fabric === undefined) return reject(ctx, profileIndex, node, 'no fabric (multi-node)');
  const want = profile.gpuClass as string;
  const need = profile.gpusPerNode;
  ctx.view.gpuFacts(i, want, profile.memoryPerGpuBytes, facts);
  if (facts.ofClass === 0 && need > 0) {
    if (!ctx.reasons) return -1;
    const have = [...new Set(node.gpus.map((g) => g.gpuClass))].sort(compareIds);
    return reject(ctx, profileIndex, node, `wants class ${want}, node has ${have.length ? have.join(', ') : 'no GPUs'}`);
  }
  if (facts.free < need) {
    if (!ctx.reasons) return -1;
    const unhealthy = facts.unhealthy ? ` (${facts.unhealthy} unhealthy)` : '';
    return reject(ctx, profileIndex, node, `needs ${freeGpus(need)}, has ${facts.free}${unhealthy}`);
  }
  if (facts.fitting < need) {
    if (!ctx.reasons) return -1;
    const memory = formatGb(profile.memoryPerGpuBytes);
    return reject(ctx, profileIndex, node, `needs ${gpus(need)} with ${memory} free memory, has ${facts.fitting}`);
  }
  const freeAfter = facts.freeAny - need;
  if (!ctx.reasons && freeAfter > bound) return -1;
  if (!fitsHostMemory(ctx, node, ctx.view.usage(i), profile, profileIndex)) return -1;
  const holds = holdsWeights(ctx, node);
  if (!holds && !fitsDisk(ctx, node, profileIndex)) return -1;
  lastHolds = holds;
  return freeAfter;
}

/** State first: a lost node that is also cordoned is reported lost. */
function whyNotPlaceable(node: NodeInfo): string {
  return node.state === 'healthy' ? 'node cordoned' : `node ${node.state}`;
}

function reject(ctx: Context, profileIndex: number, node: NodeInfo, reason: string): -1 {
  ctx.reasons?.push({ profileIndex, nodeId: node.id, reason });
  return -1;
}

/** The chosen node's GPUs for the profile: the lowest fitting indices, ascending. */
function fittingIndices(node: NodeInfo, usage: NodeUsage, profile: Profile): number[] {
  const held = usage.gpus;
  const out: number[] = [];
  for (const gpu of node.gpus) {
    if (gpu.gpuClass !== profile.gpuClass || !gpu.healthy || held.includes(gpu.index)) continue;
    if (gpu.memoryTotalBytes - (gpu.memoryUsedBytes ?? 0) >= profile.memoryPerGpuBytes) out.push(gpu.index);
  }
  return out.sort((a, b) => a - b).slice(0, profile.gpusPerNode);
}

// ---- CPU profiles ----

/**
 * CPU replicas spread: two sharing a node only slow each other. A node takes at most one per
 * core, and each reserves its host memory (the weights when the profile states none).
 */
function tryCpu(ctx: Context, profile: Profile, profileIndex: number): ReplicaMember[] | undefined {
  if (profile.nodes > 1) {
    ctx.reasons?.push({ profileIndex, reason: 'CPU profiles run on one node' });
    return undefined;
  }
  const name = ctx.request.model.name;
  let best: NodeInfo | undefined;
  let bestOfModel = 0;
  let bestCpu = 0;
  let bestMemory = 0;
  const { view, order } = ctx;
  const n = order ? order.length : view.size;
  for (let k = 0; k < n; k++) {
    const i = order ? order[k] : k;
    const node = view.node(i);
    if (node.state !== 'healthy' || node.cordoned) {
      reject(ctx, profileIndex, node, whyNotPlaceable(node));
      continue;
    }
    const usage = view.usage(i);
    if (usage.cpuReplicas >= cpuReplicaLimit(node.cpuCores)) {
      reject(ctx, profileIndex, node, `cpu: ${node.cpuCores} ${node.cpuCores === 1 ? 'core' : 'cores'}, each running a CPU replica`);
      continue;
    }
    if (!fitsHostMemory(ctx, node, usage, profile, profileIndex)) continue;
    if (!holdsWeights(ctx, node) && !fitsDisk(ctx, node, profileIndex)) continue;
    // Fewest replicas of this model, then fewest CPU replicas, then most free memory, then id.
    const ofModel = countOf(usage, name);
    const cpu = usage.cpuReplicas;
    const memory = node.memoryBytes - usage.memoryBytes;
    if (
      !best ||
      ofModel < bestOfModel ||
      (ofModel === bestOfModel &&
        (cpu < bestCpu || (cpu === bestCpu && (memory > bestMemory || (memory === bestMemory && compareIds(node.id, best.id) < 0)))))
    ) {
      best = node;
      bestOfModel = ofModel;
      bestCpu = cpu;
      bestMemory = memory;
    }
  }
  return best ? [{ nodeId: best.id, rank: 0, gpuIndices: [] }] : undefined;
}

// ---- shared checks ----

/** Host memory a replica reserves ({@link hostMemoryOf}): what the profile states, or a CPU replica's weights. */
function fitsHostMemory(ctx: Context, node: NodeInfo, usage: NodeUsage, profile: Profile, profileIndex: number): boolean {
  const need = hostMemoryOf(ctx.request.model, profile);
  if (need <= 0) return true;
  const free = node.memoryBytes - usage.memoryBytes;
  if (free >= need) return true;
  ctx.reasons?.push({
    profileIndex,
    nodeId: node.id,
    reason: `memory: needs ${formatGb(need)}, ${formatGb(Math.max(0, free))} free`,
  });
  return false;
}

/** True when the node already holds the weights (then it needs no room for them). */
function holdsWeights(ctx: Context, node: NodeInfo): boolean {
  const name = ctx.request.cacheName;
  if (name === undefined) return false;
  for (const e of node.cache.entries) if (e.name === name) return true;
  return false;
}

/** Free cache space must hold the weights; `file://` sources (no cache name) are used in place. */
function fitsDisk(ctx: Context, node: NodeInfo, profileIndex: number): boolean {
  if (ctx.request.cacheName === undefined) return true;
  const size = ctx.request.model.sizeBytes;
  if (node.cache.freeBytes >= size) return true;
  ctx.reasons?.push({
    profileIndex,
    nodeId: node.id,
    reason: `disk: needs ${formatGb(size)}, ${formatGb(Math.max(0, node.cache.freeBytes))} free`,
  });
  return false;
}

function gpus(n: number): string {
  return `${n} ${n === 1 ? 'GPU' : 'GPUs'}`;
}

function freeGpus(n: number): string {
  return `${n} free ${n === 1 ? 'GPU' : 'GPUs'}`;
}

// ---- summary ----

/** One short description of a profile for messages, e.g. `vllm 2×H100-80GB` or `llamacpp CPU`. */
export function describeProfile(profile: Profile): string {
  if (profile.gpuClass === undefined) return `${profile.engine} CPU`;
  const perNode = `${profile.gpusPerNode}×${profile.gpuClass}`;
  return profile.nodes > 1 ? `${profile.engine} ${profile.nodes} nodes × ${perNode}` : `${profile.engine} ${perNode}`;
}

const NAMED_NODES = 3;

/**
 * A header line, then per profile a line and one indented line per distinct reason: identical
 * per-node reasons are grouped (largest group first) naming up to three nodes, so a 2,000-node
 * refusal stays readable.
 */
function summarize(request: PlacementRequest, reasons: readonly PlacementReason[]): string {
  const model = request.model;
  if (model.profiles.length === 0) return `model ${model.name}: has no profiles`;
  const lines = [`model ${model.name}: no profile fits`];
  model.profiles.forEach((profile, i) => {
    lines.push(`  profile ${i} (${describeProfile(profile)}):`);
    const groups = new Map<string, string[]>();
    for (const r of reasons) {
      if (r.profileIndex !== i) continue;
      if (r.nodeId === undefined) {
        lines.push(`    ${r.reason}`);
        continue;
      }
      const ids = groups.get(r.reason);
      if (ids) ids.push(r.nodeId);
      else groups.set(r.reason, [r.nodeId]);
    }
    const ordered = [...groups].sort((a, b) => b[1].length - a[1].length || compareIds(a[0], b[0]));
    for (const [reason, ids] of ordered) {
      const named = ids.slice(0, NAMED_NODES).join(', ');
      const which = ids.length <= NAMED_NODES ? named : `${ids.length} nodes (${named}, +${ids.length - NAMED_NODES} more)`;
      lines.push(`    ${reason}: ${which}`);
    }
  });
  return lines.join('\n');
}
