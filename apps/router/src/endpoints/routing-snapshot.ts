import type { ApiEndpoint, EngineKind, MetricMapping, Endpoint, ModelRouting } from '@llmgw/domain';

/** What a router knows about one catalog model: enough to resolve a request's `model`. */
export interface ModelView {
  /** Canonical served name; endpoints refer to the model by it. */
  readonly name: string;
  readonly aliases: readonly string[];
  /** Engine of the preferred profile, when known. */
  readonly engine?: EngineKind;
  /** Overrides the engine's default metric names for this model's endpoints. */
  readonly metrics?: MetricMapping;
  /** The OpenAI API endpoints the model serves; absent = not said, every one is allowed. */
  readonly endpoints?: readonly ApiEndpoint[];
  /** Longest wait for a replica's first response byte, ms; absent = LLMGW_ROUTER_FIRST_BYTE_TIMEOUT. */
  readonly firstByteTimeoutMs?: number;
  /** Longest silence between response bytes once the response started, ms; absent = LLMGW_ROUTER_IDLE_TIMEOUT. */
  readonly stallTimeoutMs?: number;
  /** How to choose among its replicas; absent = prefix-affinity for chat and completions, least-load for embeddings. */
  readonly routing?: ModelRouting;
}

/**
 * Everything the router routes by, at one revision: the endpoints and the catalog view. Always
 * complete (never a diff), whether it came from the controller's watch stream or a static file.
 */
export interface RoutingSnapshot {
  readonly revision: number;
  readonly endpoints: readonly Endpoint[];
  readonly models: readonly ModelView[];
}
