// The controller-to-router contract: what a controller publishes and a router routes by. One
// type for every way a router gets it: the watch stream (mapped at the router's gRPC edge), a
// router in the controller's process (an EndpointSink), or the router's static config file.
import type { ApiEndpoint, EngineKind, MetricMapping } from './engine';
import type { Endpoint } from './replica';
import type { ManagedKey } from './key-limits';
import type { ModelRouting } from './catalog';

/**
 * The part of one catalog model a router resolves requests with. A controller fills `engine` and
 * `endpoints` always; they are optional because a router also takes snapshots that do not say
 * (a static config file, an older or newer controller on the wire).
 */
export interface ModelView {
  /** The served name clients put in `model`; endpoints refer to the model by it. */
  readonly name: string;
  readonly aliases: readonly string[];
  /** Engine of the model's preferred profile; absent = not known. */
  readonly engine?: EngineKind;
  /** The model's own metric names; absent = the engine's defaults. */
  readonly metrics?: MetricMapping;
  /** The OpenAI API endpoints it serves; absent = not said, every one is allowed. */
  readonly endpoints?: readonly ApiEndpoint[];
  /** The model's first-byte deadline, ms; absent = each router's default (LLMGW_ROUTER_FIRST_BYTE_TIMEOUT). */
  readonly firstByteTimeoutMs?: number;
  /** The model's deadline for silence between response bytes, ms; absent = each router's default (LLMGW_ROUTER_IDLE_TIMEOUT). */
  readonly stallTimeoutMs?: number;
  /** The model's routing policy; absent = each router's default per API (prefix-affinity for chat and completions, least-load for embeddings). */
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
 * A controller sorts `endpoints` by replica id.
 */
export interface EndpointSnapshot {
  readonly revision: number;
  readonly endpoints: readonly Endpoint[];
  readonly catalog: CatalogView;
  /** The API keys the controller manages (live ones only); absent while it manages none. */
  readonly keys?: KeySetView;
  /** Routers watching now (remote sinks), for each router's share of a limit without Redis; absent or 0 = read as 1. */
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
