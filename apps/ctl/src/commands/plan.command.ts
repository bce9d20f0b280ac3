import { readFile } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Catalog, CatalogError, cacheName, loadCatalog, parseSize } from '@llmgw/catalog';
import { NODE_STATES, type CacheEntry, type Gpu, type Model, type NodeInfo, type NodeState, type Problem, type ReplicaMember } from '@llmgw/domain';
import {
  capacityByClass,
  describeProfile,
  freeNodesByFabric,
  PlacementIndex,
  planPlacements,
  type Allocation,
  type ClassCapacity,
  type FabricCapacity,
  type Inventory,
  type PlacementReason,
} from '@llmgw/placement';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliCommand, type CliIo } from '../cli-io';

// ---- the inventory document ----

type Json = Record<string, unknown>;

/** Collects problems with their paths while reading a document; never throws. */
class Reader {
  readonly problems: Problem[] = [];

  problem(path: string, message: string): undefined {
    this.problems.push({ path, message });
    return undefined;
  }

  object(value: unknown, path: string): Json | undefined {
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Json;
    return this.problem(path, `must be an object (got ${describe(value)})`);
  }

  /** Flags keys outside `known`, so a typo never silently becomes a default. */
  known(obj: Json, path: string, known: readonly string[]): void {
    for (const k of Object.keys(obj)) if (!known.includes(k)) this.problem(join(path, k), `unknown field (expected one of: ${known.join(', ')})`);
  }

  string(obj: Json, key: string, path: string, required: boolean): string | undefined {
    const v = obj[key];
    if (v === undefined) return required ? this.problem(join(path, key), 'required') : undefined;
    if (typeof v === 'string' && v !== '') return v;
    return this.problem(join(path, key), `must be a non-empty string (got ${describe(v)})`);
  }

  boolean(obj: Json, key: string, path: string, fallback: boolean): boolean {
    const v = obj[key];
    if (v === undefined) return fallback;
    if (typeof v === 'boolean') return v;
    this.problem(join(path, key), `must be true or false (got ${describe(v)})`);
    return fallback;
  }

  count(value: unknown, path: string): number | undefined {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
    return this.problem(path, `must be a whole number ≥ 0 (got ${describe(value)})`);
  }

  /**
   * A size under `key` or its `alias` (the domain's `…Bytes` name): bytes, or a string like
   * "80GB". Zero is accepted only where `allowZero` (free space, memory in use).
   */
  size(obj: Json, key: string, alias: string, path: string, opts: { required: boolean; allowZero: boolean }): number | undefined {
    if (obj[key] !== undefined && obj[alias] !== undefined) return this.problem(join(path, key), `give ${key} or ${alias}, not both`);
    const name = obj[key] !== undefined ? key : alias;
    const v = obj[name];
    if (v === undefined) return opts.required ? this.problem(join(path, key), 'required (bytes, or a size like "80GB")') : undefined;
    if (opts.allowZero && v === 0) return 0;
    const r = parseSize(v);
    return r.ok ? r.bytes : this.problem(join(path, name), r.message);
  }
}

function join(path: string, key: string | number): string {
  return typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'object') return 'an object';
  return String(v);
}

const NODE_KEYS = ['id', 'address', 'labels', 'fabric', 'state', 'cordoned', 'cpuCores', 'memory', 'memoryBytes', 'cache', 'gpus'];
const GPU_KEYS = ['index', 'uuid', 'name', 'gpuClass', 'memoryTotal', 'memoryTotalBytes', 'memoryUsed', 'memoryUsedBytes', 'utilizationPct', 'temperatureC', 'eccErrors', 'healthy'];
const GPU_SHORTHAND_KEYS = ['count', 'name', 'gpuClass', 'memoryTotal', 'memoryTotalBytes', 'memoryUsed', 'memoryUsedBytes', 'unhealthy'];
const CACHE_KEYS = ['dir', 'total', 'totalBytes', 'free', 'freeBytes', 'entries'];
const ENTRY_KEYS = ['name', 'size', 'sizeBytes', 'modifiedAt'];
const ALLOCATION_KEYS = ['replicaId', 'model', 'nodeId', 'gpuIndices', 'memory', 'memoryBytes'];

/**
 * Reads an inventory document: `{ nodes: [...], allocations?: [...] }` with friendly defaults
 * (state `healthy`, cordoned false, GPU class = GPU name, GPU healthy, index = position, sizes as
 * bytes or strings like "80GB"; `gpus` may be `{count, name, memoryTotal, ...}` for identical
 * cards). Every problem is reported with its path; an inventory comes back only when there are none.
 */
export function parseInventory(doc: unknown): { inventory?: Inventory; problems: Problem[] } {
  const r = new Reader();
  const root = r.object(doc, '(document)');
  if (!root) return { problems: r.problems };
  r.known(root, '', ['nodes', 'allocations']);
  const nodes: NodeInfo[] = [];
  /** Ids of every node entry, valid or not: an allocation on an invalid node is not a second problem. */
  const named = new Set<string>();
  if (!Array.isArray(root.nodes)) r.problem('nodes', root.nodes === undefined ? 'required: a list of nodes' : `must be a list (got ${describe(root.nodes)})`);
  else {
    const seen = new Map<string, number>();
    root.nodes.forEach((raw, i) => {
      // Duplicates are found on the raw ids, so an invalid entry still counts.
      const id = (raw as Json | null)?.id;
      if (typeof id === 'string' && id !== '') {
        const first = seen.get(id);
        if (first !== undefined) r.problem(`nodes[${i}].id`, `duplicate node id "${id}" (also nodes[${first}])`);
        else seen.set(id, i);
        named.add(id);
      }
      const n = readNode(r, raw, `nodes[${i}]`);
      if (n) nodes.push(n);
    });
  }
  const allocations: Allocation[] = [];
  if (root.allocations !== undefined) {
    if (!Array.isArray(root.allocations)) r.problem('allocations', `must be a list (got ${describe(root.allocations)})`);
    else {
      const byId = new Map(nodes.map((n) => [n.id, n]));
      const held = new Map<string, string>();
      root.allocations.forEach((raw, i) => {
        const a = readAllocation(r, raw, `allocations[${i}]`, byId, named, held);
        if (a) allocations.push(a);
      });
    }
  }
  return r.problems.length ? { problems: r.problems } : { inventory: { nodes, allocations }, problems: [] };
}

function readNode(r: Reader, raw: unknown, path: string): NodeInfo | undefined {
  const o = r.object(raw, path);
  if (!o) return undefined;
  const before = r.problems.length;
  r.known(o, path, NODE_KEYS);
  const id = r.string(o, 'id', path, true);
  const address = r.string(o, 'address', path, false);
  const fabric = r.string(o, 'fabric', path, false);
  let state: NodeState = 'healthy';
  if (o.state !== undefined) {
    if ((NODE_STATES as readonly unknown[]).includes(o.state)) state = o.state as NodeState;
    else r.problem(join(path, 'state'), `must be one of ${NODE_STATES.join(', ')} (got ${describe(o.state)})`);
  }
  const cordoned = r.boolean(o, 'cordoned', path, false);
  const cpuCores = o.cpuCores === undefined ? 0 : r.count(o.cpuCores, join(path, 'cpuCores'));
  const memoryBytes = r.size(o, 'memory', 'memoryBytes', path, { required: true, allowZero: false });
  const labels: Record<string, string> = {};
  if (o.labels !== undefined) {
    const l = r.object(o.labels, join(path, 'labels'));
    if (l) {
      for (const [k, v] of Object.entries(l)) {
        if (typeof v === 'string') labels[k] = v;
        else r.problem(join(join(path, 'labels'), k), `must be a string (got ${describe(v)})`);
      }
    }
  }
  const cache = readCache(r, o.cache, join(path, 'cache'));
  const gpus = readGpus(r, o.gpus, join(path, 'gpus'), id ?? path);
  if (r.problems.length > before || id === undefined || memoryBytes === undefined || !cache || !gpus) return undefined;
  return {
    id,
    address: address ?? id,
    labels,
    ...(fabric !== undefined ? { fabric } : {}),
    gpus,
    cpuCores: cpuCores ?? 0,
    memoryBytes,
    cache,
    state,
    cordoned,
  };
}

function readCache(r: Reader, raw: unknown, path: string): NodeInfo['cache'] | undefined {
  if (raw === undefined) return r.problem(path, 'required: {free, total?, dir?, entries?}');
  const o = r.object(raw, path);
  if (!o) return undefined;
  r.known(o, path, CACHE_KEYS);
  const dir = o.dir === undefined ? '' : r.string(o, 'dir', path, false);
  const freeBytes = r.size(o, 'free', 'freeBytes', path, { required: true, allowZero: true });
  const totalBytes = r.size(o, 'total', 'totalBytes', path, { required: false, allowZero: true });
  if (freeBytes !== undefined && totalBytes !== undefined && freeBytes > totalBytes) r.problem(join(path, 'free'), 'is larger than total');
  const entries: CacheEntry[] = [];
  if (o.entries !== undefined) {
    if (!Array.isArray(o.entries)) r.problem(join(path, 'entries'), `must be a list of cache names or {name, size} (got ${describe(o.entries)})`);
    else {
      o.entries.forEach((e, i) => {
        const p = `${join(path, 'entries')}[${i}]`;
        if (typeof e === 'string' && e !== '') return void entries.push({ name: e, sizeBytes: 0, modifiedAt: 0 });
        const eo = r.object(e, p);
        if (!eo) return;
        r.known(eo, p, ENTRY_KEYS);
        const name = r.string(eo, 'name', p, true);
        const sizeBytes = r.size(eo, 'size', 'sizeBytes', p, { required: false, allowZero: true }) ?? 0;
        const modifiedAt = eo.modifiedAt === undefined ? 0 : r.count(eo.modifiedAt, join(p, 'modifiedAt'));
        if (name !== undefined) entries.push({ name, sizeBytes, modifiedAt: modifiedAt ?? 0 });
      });
    }
  }
  if (freeBytes === undefined || dir === undefined) return undefined;
  return { dir, totalBytes: totalBytes ?? freeBytes, freeBytes, entries };
}

function readGpus(r: Reader, raw: unknown, path: string, nodeId: string): Gpu[] | undefined {
  if (raw === undefined) return [];
  if (Array.isArray(raw)) {
    const gpus: Gpu[] = [];
    const seen = new Map<number, number>();
    raw.forEach((g, i) => {
      const index = (g as Json | null)?.index ?? i;
      if (typeof index === 'number') {
        const first = seen.get(index);
        if (first !== undefined) r.problem(`${path}[${i}].index`, `duplicate GPU index ${index} (also ${path}[${first}])`);
        else seen.set(index, i);
      }
      const gpu = readGpu(r, g, `${path}[${i}]`, i, nodeId);
      if (gpu) gpus.push(gpu);
    });
    return gpus;
  }
  // Shorthand for identical cards: {count, name, gpuClass?, memoryTotal, memoryUsed?, unhealthy?: [indices]}.
  const o = r.object(raw, path);
  if (!o) return undefined;
  const count = o.count === undefined ? r.problem(join(path, 'count'), 'required') : r.count(o.count, join(path, 'count'));
  const { count: _count, unhealthy: _unhealthy, ...card } = o;
  const template = readGpu(r, card, path, 0, nodeId, GPU_SHORTHAND_KEYS);
  const unhealthy: number[] = [];
  if (o.unhealthy !== undefined) {
    if (!Array.isArray(o.unhealthy)) r.problem(join(path, 'unhealthy'), `must be a list of GPU indices (got ${describe(o.unhealthy)})`);
    else {
      o.unhealthy.forEach((v, i) => {
        const idx = r.count(v, `${join(path, 'unhealthy')}[${i}]`);
        if (idx !== undefined && count !== undefined && idx >= count) r.problem(`${join(path, 'unhealthy')}[${i}]`, `no GPU ${idx} (count is ${count})`);
        else if (idx !== undefined) unhealthy.push(idx);
      });
    }
  }
  if (count === undefined || !template) return undefined;
  return Array.from({ length: count }, (_, index) => ({
    ...template,
    index,
    uuid: `${nodeId}-gpu${index}`,
    healthy: !unhealthy.includes(index),
  }));
}

function readGpu(r: Reader, raw: unknown, path: string, position: number, nodeId: string, keys = GPU_KEYS): Gpu | undefined {
  const o = r.object(raw, path);
  if (!o) return undefined;
  const before = r.problems.length;
  r.known(o, path, keys);
  const index = o.index === undefined ? position : r.count(o.index, join(path, 'index'));
  const name = r.string(o, 'name', path, false);
  const gpuClass = r.string(o, 'gpuClass', path, false);
  if (name === undefined && gpuClass === undefined && o.name === undefined && o.gpuClass === undefined) r.problem(join(path, 'name'), 'required (or gpuClass)');
  const total = r.size(o, 'memoryTotal', 'memoryTotalBytes', path, { required: true, allowZero: false });
  const used = r.size(o, 'memoryUsed', 'memoryUsedBytes', path, { required: false, allowZero: true });
  if (total !== undefined && used !== undefined && used > total) r.problem(join(path, 'memoryUsed'), 'is larger than memoryTotal');
  const uuid = r.string(o, 'uuid', path, false);
  const healthy = r.boolean(o, 'healthy', path, true);
  const optional: { utilizationPct?: number; temperatureC?: number; eccErrors?: number } = {};
  for (const k of ['utilizationPct', 'temperatureC', 'eccErrors'] as const) {
    if (o[k] === undefined) continue;
    if (typeof o[k] === 'number' && Number.isFinite(o[k])) optional[k] = o[k] as number;
    else r.problem(join(path, k), `must be a number (got ${describe(o[k])})`);
  }
  if (r.problems.length > before || index === undefined || total === undefined) return undefined;
  const label = (name ?? gpuClass) as string;
  return {
    index,
    uuid: uuid ?? `${nodeId}-gpu${index}`,
    name: label,
    gpuClass: gpuClass ?? label,
    memoryTotalBytes: total,
    ...(used !== undefined ? { memoryUsedBytes: used } : {}),
    ...optional,
    healthy,
  };
}

function readAllocation(
  r: Reader,
  raw: unknown,
  path: string,
  nodes: ReadonlyMap<string, NodeInfo>,
  named: ReadonlySet<string>,
  held: Map<string, string>,
): Allocation | undefined {
  const o = r.object(raw, path);
  if (!o) return undefined;
  const before = r.problems.length;
  r.known(o, path, ALLOCATION_KEYS);
  const replicaId = r.string(o, 'replicaId', path, true);
  const model = r.string(o, 'model', path, true);
  const nodeId = r.string(o, 'nodeId', path, true);
  const memoryBytes = r.size(o, 'memory', 'memoryBytes', path, { required: false, allowZero: true });
  const node = nodeId === undefined ? undefined : nodes.get(nodeId);
  if (nodeId !== undefined && !named.has(nodeId)) r.problem(join(path, 'nodeId'), `no node "${nodeId}" in nodes`);
  const gpuIndices: number[] = [];
  if (o.gpuIndices !== undefined) {
    if (!Array.isArray(o.gpuIndices)) r.problem(join(path, 'gpuIndices'), `must be a list of GPU indices (got ${describe(o.gpuIndices)})`);
    else {
      o.gpuIndices.forEach((v, i) => {
        const p = `${join(path, 'gpuIndices')}[${i}]`;
        const idx = r.count(v, p);
        if (idx === undefined || !node) return;
        if (!node.gpus.some((g) => g.index === idx)) return void r.problem(p, `node "${node.id}" has no GPU ${idx}`);
        const key = `${node.id}/${idx}`;
        const owner = held.get(key);
        if (owner !== undefined) return void r.problem(p, `GPU ${idx} of "${node.id}" is already held by replica "${owner}"`);
        held.set(key, replicaId ?? path);
        gpuIndices.push(idx);
      });
    }
  }
  if (r.problems.length > before || replicaId === undefined || model === undefined || nodeId === undefined) return undefined;
  return { replicaId, model, nodeId, gpuIndices, ...(memoryBytes !== undefined ? { memoryBytes } : {}) };
}

// ---- the plan ----

/** One wanted replica and where it would go, or why it cannot. */
export type PlannedReplica =
  | {
      model: string;
      /** 1-based among the model's wanted replicas. */
      replica: number;
      ok: true;
      profileIndex: number;
      engine: string;
      profile: string;
      members: ReplicaMember[];
    }
  | { model: string; replica: number; ok: false; summary: string; reasons: PlacementReason[] };

/** What `llmgw plan --json` prints. */
export interface Plan {
  wanted: number;
  placed: number;
  unplaceable: number;
  replicas: PlannedReplica[];
  /** After the plan. */
  capacity: ClassCapacity[];
  fabrics: FabricCapacity[];
}

/**
 * Places `replicas.min` replicas of every model, in catalog order, one after the other on the
 * inventory as it fills (including the disk each placement reserves). Pure given its inputs.
 */
export function makePlan(catalog: Catalog, inventory: Inventory): Plan {
  let index = PlacementIndex.build(inventory);
  const replicas: PlannedReplica[] = [];
  for (const model of catalog.models) {
    const request = { model, cacheName: cacheName(model.source) };
    const plan = planPlacements(index, request, model.replicas.min, (i) => `plan:${model.name}#${i + 1}`);
    plan.placed.forEach(({ result }, i) => {
      const profile = model.profiles[result.profileIndex];
      replicas.push({ model: model.name, replica: i + 1, ok: true, profileIndex: result.profileIndex, engine: profile.engine, profile: describeProfile(profile), members: result.members });
    });
    // Every replica after the first refused one is refused the same way.
    for (let k = plan.placed.length + 1; plan.refused && k <= model.replicas.min; k++) {
      replicas.push({ model: model.name, replica: k, ok: false, summary: plan.refused.summary, reasons: [...plan.refused.reasons] });
    }
    index = plan.index;
  }
  const placed = replicas.filter((r) => r.ok).length;
  return {
    wanted: replicas.length,
    placed,
    unplaceable: replicas.length - placed,
    replicas,
    capacity: capacityByClass(index.inventory),
    fabrics: freeNodesByFabric(index.inventory),
  };
}

function renderPlan(plan: Plan, catalog: Catalog): string {
  const wantedBy = new Map<string, number>(catalog.models.map((m: Model) => [m.name, m.replicas.min]));
  const out: string[] = [
    `plan: ${catalog.models.length} model${catalog.models.length === 1 ? '' : 's'}, ${plan.wanted} replica${plan.wanted === 1 ? '' : 's'} wanted — ` +
      `${plan.placed} placed, ${plan.unplaceable} cannot be placed`,
    '',
  ];
  if (plan.replicas.length) {
    out.push(
      ...table([
        ['MODEL', 'REPLICA', 'PROFILE', 'WHERE'],
        ...plan.replicas.map((r) => [
          r.model,
          `${r.replica}/${wantedBy.get(r.model) ?? '-'}`,
          r.ok ? `#${r.profileIndex} ${r.profile}` : '-',
          r.ok ? r.members.map(where).join(' ') : 'cannot be placed (see below)',
        ]),
      ]),
      '',
    );
  }
  // A refused replica leaves the fleet unchanged, so later ones of that model fail the same way.
  const failed = new Map<string, { replicas: number[]; summary: string }>();
  for (const r of plan.replicas) {
    if (r.ok) continue;
    const f = failed.get(r.model);
    if (f) f.replicas.push(r.replica);
    else failed.set(r.model, { replicas: [r.replica], summary: r.summary });
  }
  if (failed.size) {
    out.push('cannot be placed:');
    for (const [model, f] of failed) {
      const which = f.replicas.length === 1 ? `replica ${f.replicas[0]}` : `replicas ${f.replicas.join(', ')}`;
      out.push(`  ${model} ${which}:`, ...f.summary.split('\n').map((l) => `    ${l}`));
    }
    out.push('');
  }
  out.push('GPU capacity after the plan:');
  if (plan.capacity.length === 0) out.push('  (no GPUs)');
  else
    out.push(
      ...table([
        ['CLASS', 'TOTAL', 'USED', 'FREE', 'UNHEALTHY', 'UNAVAILABLE'],
        ...plan.capacity.map((c) => [c.gpuClass, c.total, c.used, c.free, c.unhealthy, c.unavailable].map(String)),
      ]).map((l) => `  ${l}`),
    );
  out.push('', 'free whole nodes per fabric after the plan:');
  if (plan.fabrics.length === 0) out.push('  (no GPU node has a fabric)');
  else out.push(...table([['FABRIC', 'NODES', 'FREE'], ...plan.fabrics.map((f) => [f.fabric, String(f.nodes), String(f.freeNodes)])]).map((l) => `  ${l}`));
  return out.join('\n') + '\n';
}

/** `node:0-3,6` for GPUs (runs collapsed), `node:cpu` for a CPU replica. */
function where(m: ReplicaMember): string {
  return `${m.nodeId}:${m.gpuIndices.length ? ranges(m.gpuIndices) : 'cpu'}`;
}

function ranges(sorted: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(j > i ? `${sorted[i]}-${sorted[j]}` : String(sorted[i]));
    i = j + 1;
  }
  return parts.join(',');
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]))).join('  ').trimEnd());
}

// ---- the command ----

async function readText(io: CliIo, file: string): Promise<{ text?: string; problem?: Problem }> {
  try {
    return { text: await readFile(resolve(io.cwd, file), 'utf8') };
  } catch (e) {
    const code = (e as { code?: string }).code;
    return { problem: { path: '', message: `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}` } };
  }
}

/**
 * `llmgw plan --catalog FILE --inventory FILE [--json]`: offline, where each wanted replica
 * (`replicas.min` of every model) would go on the given nodes, or why it cannot, then GPU
 * capacity per class and free whole nodes per fabric after. Exit 0 when every replica fits,
 * 1 when some cannot be placed or an input is invalid (every problem with its file and path),
 * 2 on a usage error.
 */
export const planCommand: CliCommand = {
  path: ['plan'],
  summary: 'where each wanted replica would go on an inventory of nodes, or why it cannot',
  usage: 'llmgw plan --catalog FILE --inventory FILE [--json]',
  async run(argv: string[], io: CliIo): Promise<number> {
    const { values } = parseArgs({
      args: argv,
      options: { catalog: { type: 'string' }, inventory: { type: 'string' }, json: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: false,
    });
    if (!values.catalog) throw new UsageError('missing --catalog FILE');
    if (!values.inventory) throw new UsageError('missing --inventory FILE');
    const json = values.json === true;
    const files = { catalog: values.catalog, inventory: values.inventory };

    // 1. Read and check both inputs, so one run reports every problem in either.
    const errors: { file: string; headline: string; problems: readonly Problem[] }[] = [];
    let catalog: Catalog | undefined;
    const catalogText = await readText(io, files.catalog);
    if (catalogText.problem) errors.push({ file: files.catalog, headline: 'cannot read file', problems: [catalogText.problem] });
    else {
      try {
        catalog = loadCatalog(catalogText.text as string, extname(files.catalog).toLowerCase() === '.json' ? 'json' : 'yaml');
      } catch (e) {
        if (!(e instanceof CatalogError)) throw e;
        errors.push({ file: files.catalog, headline: e.message.split('\n')[0], problems: e.problems });
      }
    }
    let inventory: Inventory | undefined;
    const inventoryText = await readText(io, files.inventory);
    if (inventoryText.problem) errors.push({ file: files.inventory, headline: 'cannot read file', problems: [inventoryText.problem] });
    else {
      let doc: unknown;
      try {
        doc = JSON.parse(inventoryText.text as string);
      } catch (e) {
        errors.push({ file: files.inventory, headline: 'invalid inventory: not JSON', problems: [{ path: '', message: (e as Error).message }] });
      }
      if (doc !== undefined) {
        const parsed = parseInventory(doc);
        if (parsed.inventory) inventory = parsed.inventory;
        else {
          const n = parsed.problems.length;
          errors.push({ file: files.inventory, headline: `invalid inventory: ${n} problem${n === 1 ? '' : 's'}`, problems: parsed.problems });
        }
      }
    }
    if (errors.length || !catalog || !inventory) {
      if (json) {
        const problems = errors.flatMap((e) => e.problems.map((p) => ({ file: e.file, ...p })));
        io.out(JSON.stringify({ valid: false, problems }, null, 2) + '\n');
      } else {
        for (const e of errors) {
          io.err(`${e.file}: ${e.headline}\n${e.problems.map((p) => `  ${p.path ? `${p.path}: ` : ''}${p.message}\n`).join('')}`);
        }
      }
      return EXIT_FAILURE;
    }

    // 2. Place, then report.
    const plan = makePlan(catalog, inventory);
    io.out(json ? JSON.stringify(plan, null, 2) + '\n' : renderPlan(plan, catalog));
    return plan.unplaceable === 0 ? EXIT_OK : EXIT_FAILURE;
  },
};
