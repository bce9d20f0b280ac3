import type { Gpu, NodeInfo, NodeState } from '@llmgw/domain';
import type { NodeRecord } from '@llmgw/store';
import { healthAt, type GpuLiveState, type HealthWindows, type NodeEntry, type NodeHeartbeat, type NodeRegistration, type ReportedReplica } from '@llmgw/control';

/** What changed, for listeners (publishing, reconciling, persistence). */
export type NodeChange =
  | { readonly kind: 'registered'; readonly nodeId: string; readonly previous?: NodeState }
  | { readonly kind: 'state'; readonly nodeId: string; readonly from: NodeState; readonly to: NodeState }
  | { readonly kind: 'reported'; readonly nodeId: string }
  | { readonly kind: 'cordon'; readonly nodeId: string }
  | { readonly kind: 'connection'; readonly nodeId: string; readonly connected: boolean }
  | { readonly kind: 'removed'; readonly nodeId: string }
  | { readonly kind: 'reset' };

/** A health transition found by {@link NodeRegistry.checkHealth}. */
export interface HealthTransition {
  readonly nodeId: string;
  readonly from: NodeState;
  readonly to: NodeState;
}

const EMPTY_REPORTS: ReadonlyMap<string, ReportedReplica> = new Map();

/**
 * The nodes this controller knows: registrations and heartbeats from agents, health from the
 * heartbeat windows, the operator's cordon and drain. Synchronous and single-writer: every
 * method replaces whole entries, so `snapshot()` hands out values nothing will change. Nodes
 * whose facts changed are remembered as dirty until the store has them (`takeDirty`).
 */
export class NodeRegistry {
  private nodes = new Map<string, NodeEntry>();
  private readonly dirty = new Set<string>();
  private listener: ((change: NodeChange) => void) | undefined;
  /** Health is measured from no earlier than this (when leadership began). */
  private healthFloor = 0;

  /** Sets the one listener told about every change (the composition root fans it out). */
  onChange(listener: (change: NodeChange) => void): void {
    this.listener = listener;
  }

  /** Every node by id; a copy whose entries never change. */
  snapshot(): ReadonlyMap<string, NodeEntry> {
    return new Map(this.nodes);
  }

  get(id: string): NodeEntry | undefined {
    return this.nodes.get(id);
  }

  get size(): number {
    return this.nodes.size;
  }

  /**
   * Replaces everything with the stored nodes (a new leader, or a standby's periodic read).
   * Cordon and drain are the store's, so a drain goes on under whichever controller leads.
   * Nothing is connected; health is measured from `healthFloor` at the earliest, so nodes get
   * the full windows to reconnect.
   */
  loadFromStore(records: readonly NodeRecord[], healthFloor: number): void {
    this.healthFloor = healthFloor;
    const next = new Map<string, NodeEntry>();
    for (const r of records) {
      const { lastSeen, draining, ...info } = r;
      next.set(r.id, {
        info,
        ...(info.cache.freeBytes > 0 || info.cache.totalBytes > 0 ? { cacheFreeBytes: info.cache.freeBytes, cacheTotalBytes: info.cache.totalBytes } : {}),
        ...(lastSeen !== undefined ? { lastSeen } : {}),
        connected: false,
        draining,
        reported: EMPTY_REPORTS,
      });
    }
    this.nodes = next;
    this.dirty.clear();
    this.emit({ kind: 'reset' });
  }

  /** An agent registered (a new node, or a known one reconnecting): healthy, connected, its report taken as complete. */
  register(reg: NodeRegistration, now: number): NodeEntry {
    const previous = this.nodes.get(reg.id);
    const info: NodeInfo = {
      id: reg.id,
      address: reg.address,
      labels: reg.labels,
      ...(reg.fabric !== undefined ? { fabric: reg.fabric } : {}),
      gpus: reg.gpus,
      cpuCores: reg.cpuCores,
      memoryBytes: reg.memoryBytes,
      cache: { dir: reg.cacheDir, totalBytes: reg.cacheTotalBytes ?? 0, freeBytes: reg.cacheFreeBytes ?? 0, entries: reg.cacheEntries },
      state: 'healthy',
      cordoned: previous?.info.cordoned ?? false,
    };
    const entry: NodeEntry = {
      info,
      ...(reg.cacheFreeBytes !== undefined ? { cacheFreeBytes: reg.cacheFreeBytes } : {}),
      ...(reg.cacheTotalBytes !== undefined ? { cacheTotalBytes: reg.cacheTotalBytes } : {}),
      lastSeen: now,
      connected: true,
      draining: previous?.draining ?? false,
      ...(reg.agentVersion !== '' ? { agentVersion: reg.agentVersion } : {}),
      reported: byId(reg.replicas),
      reportedAt: now,
    };
    this.nodes.set(reg.id, entry);
    this.dirty.add(reg.id);
    this.emit({ kind: 'registered', nodeId: reg.id, ...(previous ? { previous: previous.info.state } : {}) });
    return entry;
  }

  /** A heartbeat: live GPU state, disk, the complete replica list; a silent node that speaks again is healthy. */
  heartbeat(nodeId: string, hb: NodeHeartbeat, now: number): NodeEntry | undefined {
    const entry = this.nodes.get(nodeId);
    if (!entry) return undefined;
    const wasState = entry.info.state;
    // What the heartbeat leaves as it was is shared with the previous entry (entries are
    // immutable): an idle fleet's heartbeats then make one small object per node, not a copy of
    // its GPUs, cache and replica list every few seconds.
    const gpus = mergeGpus(entry.info.gpus, hb.gpus);
    const cacheSame = hb.cacheEntries === undefined && (hb.cacheFreeBytes === undefined || hb.cacheFreeBytes === entry.info.cache.freeBytes);
    const cache = cacheSame
      ? entry.info.cache
      : {
          ...entry.info.cache,
          ...(hb.cacheFreeBytes !== undefined ? { freeBytes: hb.cacheFreeBytes } : {}),
          ...(hb.cacheEntries !== undefined ? { entries: hb.cacheEntries } : {}),
        };
    const info = gpus === entry.info.gpus && cache === entry.info.cache && wasState === 'healthy' ? entry.info : { ...entry.info, gpus, cache, state: 'healthy' as const };
    const next: NodeEntry = {
      ...entry,
      info,
      ...(hb.cacheFreeBytes !== undefined ? { cacheFreeBytes: hb.cacheFreeBytes } : {}),
      lastSeen: now,
      reported: sameList(entry.reported, hb.replicas) ? entry.reported : byId(hb.replicas),
      reportedAt: now,
    };
    this.nodes.set(nodeId, next);
    if (hb.cacheEntries !== undefined) this.dirty.add(nodeId);
    if (wasState !== 'healthy') {
      this.dirty.add(nodeId);
      this.emit({ kind: 'state', nodeId, from: wasState, to: 'healthy' });
    }
    if (!sameReports(entry.reported, next.reported)) this.emit({ kind: 'reported', nodeId });
    return next;
  }

  /** One replica changed on a node (ReplicaStatus): merged into the node's report. */
  replicaChanged(nodeId: string, report: Partial<ReportedReplica> & Pick<ReportedReplica, 'replicaId' | 'state'>): void {
    const entry = this.nodes.get(nodeId);
    if (!entry) return;
    const known = entry.reported.get(report.replicaId);
    const merged: ReportedReplica = {
      model: '',
      engine: 'vllm',
      gpuIndices: [],
      rank: 0,
      restarts: 0,
      ...known,
      ...stripUndefined(report),
      replicaId: report.replicaId,
      state: report.state,
    };
    if (report.reason === undefined && known?.reason !== undefined && report.state !== known.state) {
      // A new state without a reason has none: the old reason belonged to the old state.
      delete (merged as { reason?: string }).reason;
    }
    const reported = new Map(entry.reported);
    reported.set(report.replicaId, merged);
    this.nodes.set(nodeId, { ...entry, reported });
    this.emit({ kind: 'reported', nodeId });
  }

  /** The agent's stream ended. Health still follows the heartbeat windows. */
  disconnected(nodeId: string): void {
    const entry = this.nodes.get(nodeId);
    if (!entry || !entry.connected) return;
    this.nodes.set(nodeId, { ...entry, connected: false });
    this.emit({ kind: 'connection', nodeId, connected: false });
  }

  /** Applies the heartbeat windows at `now`; returns every transition (each also emitted). */
  checkHealth(now: number, windows: HealthWindows): HealthTransition[] {
    const transitions: HealthTransition[] = [];
    for (const [id, entry] of this.nodes) {
      const since = Math.max(entry.lastSeen ?? 0, this.healthFloor);
      const to = healthAt(since, now, windows);
      const from = entry.info.state;
      // Only silence moves a node down; only a heartbeat or registration brings it back.
      if (to === from || rank(to) < rank(from)) continue;
      this.nodes.set(id, { ...entry, info: { ...entry.info, state: to } });
      this.dirty.add(id);
      transitions.push({ nodeId: id, from, to });
      this.emit({ kind: 'state', nodeId: id, from, to });
    }
    return transitions;
  }

  /** Operator cordon/uncordon; uncordon also ends a drain. Returns false for an unknown node. */
  setCordoned(nodeId: string, cordoned: boolean, draining = false): boolean {
    const entry = this.nodes.get(nodeId);
    if (!entry) return false;
    this.nodes.set(nodeId, { ...entry, info: { ...entry.info, cordoned }, draining: cordoned && draining });
    this.emit({ kind: 'cordon', nodeId });
    return true;
  }

  /** Forgets a node (an operator's `nodes forget`); returns false for an unknown one. */
  remove(nodeId: string): boolean {
    if (!this.nodes.delete(nodeId)) return false;
    this.dirty.delete(nodeId);
    this.emit({ kind: 'removed', nodeId });
    return true;
  }

  /** Ids whose facts changed since the last call (and forgets them). */
  takeDirty(): string[] {
    const ids = [...this.dirty];
    this.dirty.clear();
    return ids;
  }

  /** Puts ids back after a failed store write. */
  markDirty(ids: Iterable<string>): void {
    for (const id of ids) if (this.nodes.has(id)) this.dirty.add(id);
  }

  private emit(change: NodeChange): void {
    this.listener?.(change);
  }
}

/** The stored form of an entry. */
export function nodeRecordOf(entry: NodeEntry): NodeRecord {
  return { ...entry.info, draining: entry.draining, ...(entry.lastSeen !== undefined ? { lastSeen: entry.lastSeen } : {}) };
}

function rank(state: NodeState): number {
  return state === 'healthy' ? 0 : state === 'unreachable' ? 1 : 2;
}

function byId(replicas: readonly ReportedReplica[]): ReadonlyMap<string, ReportedReplica> {
  if (replicas.length === 0) return EMPTY_REPORTS;
  return new Map(replicas.map((r) => [r.replicaId, r]));
}

function sameReports(a: ReadonlyMap<string, ReportedReplica>, b: ReadonlyMap<string, ReportedReplica>): boolean {
  if (a.size !== b.size) return false;
  for (const [id, r] of a) {
    const o = b.get(id);
    if (!o || o.state !== r.state || o.port !== r.port || o.reason !== r.reason) return false;
  }
  return true;
}

/** Whether `list` says exactly what `reported` holds (same replicas, every field equal). */
function sameList(reported: ReadonlyMap<string, ReportedReplica>, list: readonly ReportedReplica[]): boolean {
  if (reported.size !== list.length) return false;
  for (const r of list) {
    const o = reported.get(r.replicaId);
    if (!o || !sameFields(o, r)) return false;
  }
  return true;
}

/** Same own fields with equal values; arrays (gpuIndices) compared element by element. */
function sameFields(a: object, b: object): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    const x: unknown = (a as Record<string, unknown>)[k];
    const y: unknown = (b as Record<string, unknown>)[k];
    if (x === y) continue;
    if (!Array.isArray(x) || !Array.isArray(y) || x.length !== y.length || x.some((v, i) => v !== y[i])) return false;
  }
  return true;
}

/**
 * Registered GPUs with a heartbeat's live values; a field the heartbeat leaves unset is unknown
 * now. A GPU whose live values did not change is the same object, and when none changed the
 * same array is returned.
 */
function mergeGpus(gpus: readonly Gpu[], live: readonly GpuLiveState[]): readonly Gpu[] {
  if (live.length === 0) return gpus;
  const byIndex = new Map(live.map((g) => [g.index, g]));
  let changed = false;
  const merged = gpus.map((g) => {
    const l = byIndex.get(g.index);
    if (!l || sameLive(g, l)) return g;
    changed = true;
    return {
      index: g.index,
      uuid: g.uuid,
      name: g.name,
      gpuClass: g.gpuClass,
      memoryTotalBytes: g.memoryTotalBytes,
      ...(l.memoryUsedBytes !== undefined ? { memoryUsedBytes: l.memoryUsedBytes } : {}),
      ...(l.utilizationPct !== undefined ? { utilizationPct: l.utilizationPct } : {}),
      ...(l.temperatureC !== undefined ? { temperatureC: l.temperatureC } : {}),
      ...(l.eccErrors !== undefined ? { eccErrors: l.eccErrors } : {}),
      healthy: l.healthy,
    };
  });
  return changed ? merged : gpus;
}

/** Whether merging `live` into `g` would give `g` again. */
function sameLive(g: Gpu, live: GpuLiveState): boolean {
  return (
    g.memoryUsedBytes === live.memoryUsedBytes &&
    g.utilizationPct === live.utilizationPct &&
    g.temperatureC === live.temperatureC &&
    g.eccErrors === live.eccErrors &&
    g.healthy === live.healthy &&
    ('memoryUsedBytes' in g) === (live.memoryUsedBytes !== undefined) &&
    ('utilizationPct' in g) === (live.utilizationPct !== undefined) &&
    ('temperatureC' in g) === (live.temperatureC !== undefined) &&
    ('eccErrors' in g) === (live.eccErrors !== undefined)
  );
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
