/** The inference engines llmgw can run. */
export const ENGINE_KINDS = ['vllm', 'llamacpp'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/**
 * The OpenAI API endpoints a model can serve: `/v1/chat/completions`, `/v1/completions`,
 * `/v1/embeddings`. Which ones a model serves follows from its engine and flags (libs/catalog),
 * or from the catalog's explicit `endpoints`.
 */
export const API_ENDPOINTS = ['chat', 'completions', 'embeddings'] as const;
export type ApiEndpoint = (typeof API_ENDPOINTS)[number];

/**
 * Which metric names describe an engine's load. A mapping that names its own `running` is a
 * complete statement: fields it leaves blank stay blank (see libs/metrics-mappings).
 * `kvUsage` lists names in preference order (the first present wins).
 */
export interface MetricMapping {
  running?: string;
  waiting?: string;
  kvUsage?: readonly string[];
  /** Label carrying the served model name, used to filter when one engine serves several names. */
  modelLabel?: string;
}

/**
 * An engine's load as read from its metrics (and, for llama.cpp, its /slots). Every field is
 * optional: absent means nobody reported it, which is never the same as 0. `kvUsage` is a
 * fraction in [0, 1].
 */
export interface EngineLoad {
  running?: number;
  waiting?: number;
  kvUsage?: number;
  /** Sequences the engine runs at once, as the engine reports it (llama.cpp: its slot count); ≥ 1. */
  capacity?: number;
}
