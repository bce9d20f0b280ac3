import type { NodeInfo, NodeState, Replica, ReplicaMember, ReplicaState } from '@llmgw/domain';
import type { Fence } from '@llmgw/lease';

// Narrow ports, one per consumer (CONVENTIONS 4). Consumers may narrow further with
// Pick<…>; the TypeORM classes in this lib implement them on SQLite and PostgreSQL alike.
// All times are integer milliseconds since the epoch; absent means unknown, never 0.

/** A node as last stored: what the agent reported plus the controller's view of it. */
export interface NodeRecord extends NodeInfo {
  /** Last heartbeat or registration; absent = never heard from. */
  readonly lastSeen?: number;
  /** Operator asked to drain: cordoned, and its replicas are moved elsewhere. Never true without `cordoned`. */
  readonly draining: boolean;
}

/** Nodes: written by the controller from agent registrations/heartbeats and operator commands. */
export interface NodeRepository {
  get(id: string): Promise<NodeRecord | undefined>;
  /** Every node, ordered by id. */
  list(): Promise<NodeRecord[]>;
  /**
   * Inserts or replaces a node's reported facts (address, labels, fabric, hardware, state,
   * lastSeen). `cordoned` is taken from `node` only when the node is new, and a new node is not
   * draining: an operator's cordon and drain survive re-registration and are changed only by
   * {@link setCordoned}.
   */
  upsert(node: Omit<NodeRecord, 'draining'>): Promise<void>;
  /**
   * Sets both operator flags in one statement. `draining` (default false) holds only with
   * `cordoned`: uncordoning ends a drain, and so does a plain cordon. Throws DomainError
   * `not_found` for an unknown node.
   */
  setCordoned(id: string, cordoned: boolean, draining?: boolean): Promise<void>;
  /** Health transition, optionally with the time it was last seen. Throws `not_found` for an unknown node. */
  setState(id: string, state: NodeState, lastSeen?: number): Promise<void>;
  /** Removes a node and the credential bound to its id; returns whether either existed. */
  remove(id: string): Promise<boolean>;
  /** The hash bound to a node id at its first join; undefined when the id is not bound. */
  credentialHash(id: string): Promise<string | undefined>;
  /**
   * Binds a node id to `secretHash` unless it is bound already (one statement: of two racing
   * first joins exactly one wins). Returns whether this call made the binding.
   */
  bindCredential(id: string, secretHash: string, at: number): Promise<boolean>;
  /** Undoes a binding of exactly `secretHash` (one whose secret never reached its agent); returns whether it existed. */
  releaseCredential(id: string, secretHash: string): Promise<boolean>;
}

/** What may change on a stored replica. `reason: null` clears the reason. */
export interface ReplicaChange {
  readonly state?: ReplicaState;
  readonly reason?: string | null;
  readonly restarts?: number;
  readonly members?: readonly ReplicaMember[];
  readonly updatedAt: number;
}

/**
 * Replicas: the reconciler's record of what it placed. Writes that place, change or evict a
 * replica carry a {@link Fence} checked in the same transaction; a deposed leader's write
 * throws DomainError `fenced` and changes nothing.
 */
export interface ReplicaRepository {
  get(id: string): Promise<Replica | undefined>;
  /** All replicas (or one model's), ordered by id. */
  list(filter?: { readonly model?: string }): Promise<Replica[]>;
  /** Stores a new replica. Throws `conflict` if the id exists, `fenced` if the fence no longer holds. */
  place(replica: Replica, fence: Fence): Promise<void>;
  /** Stores several new replicas in one fenced transaction, all or none. Throws `conflict` (an id exists) or `fenced`. */
  placeAll(replicas: readonly Replica[], fence: Fence): Promise<void>;
  /** Applies `change` and returns the stored replica. Throws `not_found`, or `fenced`. */
  update(id: string, change: ReplicaChange, fence: Fence): Promise<Replica>;
  /** Deletes the replica; returns whether it existed. Throws `fenced`. */
  evict(id: string, fence: Fence): Promise<boolean>;
  /**
   * Records router usage (replica id → last used, ms); the newest time wins and an older report
   * never moves it back. Unknown ids are ignored. Returns how many replicas moved forward.
   */
  recordUsage(usage: ReadonlyMap<string, number>): Promise<number>;
  /** Every recorded last-used time (replica id → ms); replicas never reported are absent. */
  listUsage(): Promise<Map<string, number>>;
}

/** One stored catalog document. `document` is the JSON the catalog API accepted. */
export interface CatalogRevision {
  readonly revision: number;
  readonly document: unknown;
  readonly author: string;
  readonly createdAt: number;
}

/** Catalog documents with revisions: written by the catalog API, polled by the controller. */
export interface CatalogRepository {
  /** The newest revision, or undefined when no catalog was ever stored. */
  current(): Promise<CatalogRevision | undefined>;
  /** The newest revision number; 0 when none. Cheap enough to poll. */
  currentRevision(): Promise<number>;
  get(revision: number): Promise<CatalogRevision | undefined>;
  /** Revisions newest first, without documents. */
  history(limit?: number): Promise<Omit<CatalogRevision, 'document'>[]>;
  /**
   * Stores `document` as revision current + 1. With `expectedRevision` (0 = "no catalog yet")
   * it succeeds only if that is still the current revision, decided atomically by the
   * database: of two writers expecting the same revision exactly one wins and the other gets
   * DomainError `conflict` naming the current revision. Without it, it always appends.
   */
  put(document: unknown, author: string, expectedRevision?: number): Promise<CatalogRevision>;
}

/** Decisions the controller records, for `explain` and operators. */
export const EVENT_KINDS = ['placed', 'evicted', 'refused', 'lost', 'failed', 'stopped', 'adopted', 'unplaceable', 'cordoned', 'uncordoned', 'forgotten'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

export interface NewEvent {
  readonly kind: EventKind;
  /** Default: the store's clock. */
  readonly time?: number;
  readonly model?: string;
  readonly replicaId?: string;
  readonly nodeId?: string;
  readonly reason?: string;
}

export interface StoredEvent extends NewEvent {
  /** Grows with every event; never reused after pruning. */
  readonly id: number;
  readonly time: number;
}

export interface EventQuery {
  readonly model?: string;
  readonly replicaId?: string;
  readonly nodeId?: string;
  /** Only events with a smaller id (paging backwards). */
  readonly beforeId?: number;
  /** Default 100. */
  readonly limit?: number;
}

/** The decision log, with bounded retention: only the newest N events are kept. */
export interface EventRepository {
  record(event: NewEvent): Promise<StoredEvent>;
  /** Matching events, newest first. */
  list(query?: EventQuery): Promise<StoredEvent[]>;
}
