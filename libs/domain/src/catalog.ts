import type { ApiEndpoint, EngineKind, MetricMapping } from './engine';

/**
 * One way to deploy a model, after validation (see libs/catalog for the document schema).
 * A profile without `gpuClass` runs on CPU. Sizes are bytes.
 */
export interface Profile {
  readonly engine: EngineKind;
  /** GPU class wanted (e.g. `H100-80GB`); absent = CPU. */
  readonly gpuClass?: string;
  /** Whole GPUs per node; 0 on CPU. */
  readonly gpusPerNode: number;
  /** Nodes a replica spans (multi-node); 1 for most profiles. */
  readonly nodes: number;
  readonly tensorParallel: number;
  readonly pipelineParallel: number;
  /** GPU memory each GPU must have free, bytes; 0 when the profile does not say. */
  readonly memoryPerGpuBytes: number;
  /** Host memory a replica needs, bytes; 0 when the profile does not say. */
  readonly memoryBytes: number;
  /** Context length passed to engines that take one. */
  readonly contextLength?: number;
  /** Parallel sequences for engines that take one (llama.cpp `-np`). */
  readonly parallel?: number;
  /** Extra engine arguments, an argv array (never a shell string). */
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** The API endpoints this profile serves, as the catalog states them; absent = derived from engine and flags. */
  readonly endpoints?: readonly ApiEndpoint[];
}

export interface ReplicaCount {
  readonly min: number;
  readonly max: number;
}

/** A model clients can ask for by `name` or any alias. */
export interface Model {
  readonly name: string;
  readonly aliases: readonly string[];
  /** `file://`, `http(s)://` or `hf://org/repo[/file]@revision`. */
  readonly source: string;
  /** Size of the weights, bytes. */
  readonly sizeBytes: number;
  /** Optional sha256 (hex) of a single-file source, checked after download. */
  readonly sha256?: string;
  readonly replicas: ReplicaCount;
  /** Profiles in preference order: the first that fits wins. */
  readonly profiles: readonly Profile[];
  /** Overrides the engine's default metric mapping. */
  readonly metrics?: MetricMapping;
  /** The API endpoints the model serves, as the catalog states them; absent = what every profile serves. */
  readonly endpoints?: readonly ApiEndpoint[];
  /** Longest wait for a replica's first response byte, ms; absent = the router's default. */
  readonly firstByteTimeoutMs?: number;
  /** Longest silence in the middle of a response (between tokens), ms; absent = the router's default. */
  readonly stallTimeoutMs?: number;
  /** How routers choose a replica; absent = prefix-affinity for chat and completions, least-load for embeddings. */
  readonly routing?: ModelRouting;
}

/** How a router chooses among a model's replicas (see libs/routing). */
export const ROUTING_POLICIES = ['least-load', 'prefix-affinity', 'round-robin'] as const;
export type RoutingPolicyName = (typeof ROUTING_POLICIES)[number];

/**
 * Prefix-affinity parameters, after validation. A prompt is cut into blocks of `blockChars`
 * characters; at most `maxBlocks` of them are hashed into the key; a replica whose estimated load
 * is at or above ⌈(1 + epsilon) × mean⌉ (the request counted) is passed over.
 */
export interface PrefixAffinityParams {
  readonly blockChars: number;
  readonly maxBlocks: number;
  readonly epsilon: number;
}

/** A model's routing, as the catalog states it. Parameters it leaves out take the defaults (DEFAULT_PREFIX_AFFINITY). */
export interface ModelRouting {
  readonly policy: RoutingPolicyName;
  /** Only with `prefix-affinity`. */
  readonly prefixAffinity?: Partial<PrefixAffinityParams>;
}

/** Prefix-affinity defaults: 256-character blocks, 32 of them (~8 KB, ~2k tokens), ε = 0.25. */
export const DEFAULT_PREFIX_AFFINITY: PrefixAffinityParams = Object.freeze({ blockChars: 256, maxBlocks: 32, epsilon: 0.25 });
