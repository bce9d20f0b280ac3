import type { ApiEndpoint, EngineKind, MetricMapping } from './engine';
import type { Endpoint } from './replica';
import type { ManagedKey } from './key-limits';
import type { ModelRouting } from './catalog';

/** The part of one catalog model a router resolves requests with. */
export interface ModelView {
  /** The served name clients put in `model`. */
  readonly name: string;
  readonly aliases: readonly string[];
  /** Engine of the model's preferred profile. */
  readonly engine: EngineKind;
  /** The model's own metric names; absent = the engine's defaults. */
  readonly metrics?: MetricMapping;
  /** The OpenAI API endpoints it serves (never empty for a valid catalog). */
  readonly endpoints: readonly ApiEndpoint[];
  /** The model's first-byte deadline, ms; absent = each router's default. */
  readonly firstByteTimeoutMs?: number;
  /** The model's deadline for silence between tokens, ms; absent = each router's default. */
  readonly stallTimeoutMs?: number;
  /** The model's routing policy; absent = each router's default per API. */
  readonly routing?: ModelRouting;
}

/** The catalog as routers see it, at the store revision it was built from. */
export interface CatalogView {
  readonly revision: number;
  readonly models: readonly ModelView[];
}

/**
 * Everything a router routes by, complete (never a diff). `revision` only grows for the life of
 * a controller process; a router that sees a new stream starts over from its first snapshot.
 * `endpoints` are sorted by replica id.
 */
export interface EndpointSnapshot {
  readonly revision: number;
  readonly endpoints: readonly Endpoint[];
  readonly catalog: CatalogView;
  /** The API keys the controller manages (live ones only); absent while it manages none. */
  readonly keys?: KeySetView;
  /** Routers watching now (remote sinks), for each router's share of a limit without Redis. */
  readonly routers?: number;
}

/** The managed keys, as one object that is replaced only when a key changes (identity = unchanged). */
export interface KeySetView {
  readonly keys: readonly ManagedKey[];
}

/**
 * Where snapshots go: a router's `RouterService.Watch` stream, or a router in the same process.
 * `publish` gets the current snapshot at once when the sink is attached, then every new one,
 * in revision order. It must not throw and must not block: a slow sink may skip to the newest.
 */
export interface EndpointSink {
  publish(snapshot: EndpointSnapshot): void;
  /** This controller stopped leading: a remote sink ends its stream (an in-process one may stay). */
  leadershipLost?(): void;
}
