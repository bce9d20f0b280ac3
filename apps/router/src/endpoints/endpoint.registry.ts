import type { Endpoint, EndpointSnapshot, MetricMapping } from '@llmgw/domain';
import { defaultMapping, resolveMapping } from '@llmgw/metrics-mappings';
import { CatalogView } from './catalog.view';
import { EndpointState, parseTarget, type EndpointStateOptions } from './endpoint.state';

/** What applying one snapshot did. `applied: false` means it was older than the current revision and ignored. */
export interface ApplyResult {
  readonly applied: boolean;
  readonly revision: number;
  readonly added: readonly string[];
  readonly kept: readonly string[];
  readonly removed: readonly string[];
  /** Endpoints the snapshot listed that could not be used, with why (bad URL, duplicate id). */
  readonly skipped: readonly { readonly replicaId: string; readonly reason: string }[];
}

/** Called after every applied snapshot. */
export type SnapshotListener = (result: ApplyResult) => void;

/** What the registry is built with: every endpoint's state options, and the registry's own hooks. */
export interface EndpointRegistryOptions extends Omit<EndpointStateOptions, 'onDrained'> {
  /**
   * Called once a replica id is gone for good: no snapshot lists it and no removed endpoint
   * with that id has a request in flight (at once when it had none). What is kept per replica
   * id elsewhere (metric series) may be forgotten then; a later snapshot listing the id again
   * starts afresh. May be called again for the same id if a removed endpoint is sent a
   * request after all (the proxy resending on a stale connection) and that one finishes.
   */
  readonly onGone?: (replicaId: string) => void;
}

/**
 * The router's endpoints and catalog view. Snapshots replace the set as a whole; an endpoint
 * that survives (same replica id, URL and engine) keeps its live state, a removed one is marked
 * removed (no new requests; in-flight ones finish against the object they hold), and its
 * replica id is reported gone once nothing lists it and nothing is in flight on it.
 */
export class EndpointRegistry {
  private readonly states = new Map<string, EndpointState>();
  private byModel = new Map<string, readonly EndpointState[]>();
  private catalogView = CatalogView.EMPTY;
  private current: number | undefined;
  /** Last-used times of endpoints removed since the last usage collection (reported once more). */
  private removedUsage = new Map<string, number>();
  private readonly listeners: SnapshotListener[] = [];
  /** Removed endpoints with requests still in flight, by replica id (an id may come and go more than once). */
  private readonly draining = new Map<string, Set<EndpointState>>();
  private readonly stateOptions: EndpointStateOptions;

  constructor(private readonly options: EndpointRegistryOptions) {
    this.stateOptions = { ...options, onDrained: (state) => this.drained(state) };
  }

  /** The current catalog view (swap-on-write: hold the reference for the length of one request). */
  get catalog(): CatalogView {
    return this.catalogView;
  }

  /** Revision of the snapshot applied last; undefined before the first. */
  get revision(): number | undefined {
    return this.current;
  }

  /** Endpoints that may take new requests for canonical model `model` (possibly empty). */
  endpointsFor(model: string): readonly EndpointState[] {
    return this.byModel.get(model) ?? NONE;
  }

  /** Every listed endpoint. */
  active(): IterableIterator<EndpointState> {
    return this.states.values();
  }

  get size(): number {
    return this.states.size;
  }

  /** The live state of a listed endpoint by replica id. */
  get(replicaId: string): EndpointState | undefined {
    return this.states.get(replicaId);
  }

  onSnapshot(listener: SnapshotListener): void {
    this.listeners.push(listener);
  }

  /**
   * What applying a snapshot at `revision` would give if it is stale (see `apply`); undefined
   * when it would be applied. Lets a receiver skip a stale message before decoding it.
   */
  staleResult(revision: number, resync: boolean): ApplyResult | undefined {
    if (resync || this.current === undefined || revision > this.current) return undefined;
    return { applied: false, revision, added: [], kept: [], removed: [], skipped: [] };
  }

  /**
   * Applies a complete snapshot. Without `resync`, one whose revision is not newer than the
   * current one is ignored (a late or repeated message). With `resync` (the first message of a
   * new watch stream, or a static file) it is applied whatever its revision: a restarted
   * controller counts revisions from the start again, and what it lists now is the truth.
   */
  apply(snapshot: EndpointSnapshot, opts: { resync: boolean }): ApplyResult {
    const stale = this.staleResult(snapshot.revision, opts.resync);
    if (stale !== undefined) return stale;
    const catalog = new CatalogView(snapshot.catalog.models);
    const added: string[] = [];
    const kept: string[] = [];
    const skipped: { replicaId: string; reason: string }[] = [];
    const next = new Map<string, EndpointState>();
    for (const endpoint of snapshot.endpoints) {
      if (next.has(endpoint.replicaId)) {
        skipped.push({ replicaId: endpoint.replicaId, reason: 'listed twice in one snapshot' });
        continue;
      }
      const mapping = mappingFor(endpoint, catalog);
      const existing = this.states.get(endpoint.replicaId);
      if (existing !== undefined && existing.endpoint.url === endpoint.url && existing.endpoint.engine === endpoint.engine) {
        existing.update(endpoint, mapping);
        next.set(endpoint.replicaId, existing);
        kept.push(endpoint.replicaId);
        continue;
      }
      try {
        next.set(endpoint.replicaId, new EndpointState(endpoint, parseTarget(endpoint.url), mapping, this.stateOptions));
        added.push(endpoint.replicaId);
      } catch (error) {
        skipped.push({ replicaId: endpoint.replicaId, reason: error instanceof Error ? error.message : String(error) });
      }
    }
    const removed: string[] = [];
    const idle: string[] = [];
    for (const [id, state] of this.states) {
      if (next.get(id) === state) continue;
      state.removed = true;
      if (state.inFlight > 0) this.draining.set(id, (this.draining.get(id) ?? new Set()).add(state));
      else idle.push(id);
      if (state.lastUsedAt !== undefined) this.removedUsage.set(id, Math.max(state.lastUsedAt, this.removedUsage.get(id) ?? 0));
      if (!next.has(id)) removed.push(id);
    }
    const byModel = new Map<string, EndpointState[]>();
    for (const state of next.values()) {
      const list = byModel.get(state.endpoint.model);
      if (list === undefined) byModel.set(state.endpoint.model, [state]);
      else list.push(state);
    }
    this.states.clear();
    for (const [id, state] of next) this.states.set(id, state);
    this.byModel = byModel;
    this.catalogView = catalog;
    this.current = snapshot.revision;
    for (const id of idle) this.goneIfUnused(id);
    const result: ApplyResult = { applied: true, revision: snapshot.revision, added, kept, removed, skipped };
    for (const listener of this.listeners) listener(result);
    return result;
  }

  /** A removed endpoint's last in-flight request finished. */
  private drained(state: EndpointState): void {
    const generations = this.draining.get(state.id);
    if (generations?.delete(state) === true && generations.size === 0) this.draining.delete(state.id);
    this.goneIfUnused(state.id);
  }

  /** Reports `replicaId` gone when no snapshot lists it and nothing is in flight on it. */
  private goneIfUnused(replicaId: string): void {
    if (!this.states.has(replicaId) && !this.draining.has(replicaId)) this.options.onGone?.(replicaId);
  }

  /** Requests this router has in flight on any endpoint, listed or removed (draining). */
  inFlight(): number {
    let n = 0;
    for (const state of this.states.values()) n += state.inFlight;
    for (const generations of this.draining.values()) for (const state of generations) n += state.inFlight;
    return n;
  }

  /**
   * Replica id → last time this router sent it a request (ms since epoch), for the usage report.
   * Replicas not used since this router started are absent (unknown is not idle). Endpoints
   * removed since the previous call are included once more, then forgotten.
   */
  collectUsage(): Map<string, number> {
    const usage = new Map<string, number>(this.removedUsage);
    this.removedUsage = new Map();
    for (const state of this.states.values()) {
      if (state.lastUsedAt === undefined) continue;
      usage.set(state.id, Math.max(state.lastUsedAt, usage.get(state.id) ?? 0));
    }
    return usage;
  }
}

const NONE: readonly EndpointState[] = Object.freeze([]);

/** The metric mapping an endpoint is scraped with: its own, else its model's override, else the engine default. */
function mappingFor(endpoint: Endpoint, catalog: CatalogView): MetricMapping {
  const override = endpoint.metrics ?? catalog.model(endpoint.model)?.metrics;
  try {
    return resolveMapping(endpoint.engine, override);
  } catch {
    // The catalog validated the override; a bad one arriving anyway must not stop routing.
    return defaultMapping(endpoint.engine);
  }
}
