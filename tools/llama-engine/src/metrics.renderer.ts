import { renderPrometheusText, type MetricFamily, type MetricType } from '@llmgw/metrics-mappings';

/**
 * Running totals of the engine since start. Token counts in tokens, times in milliseconds.
 * Counters only grow; `processing`/`deferred`/`kvTokens` are the values now.
 */
export interface EngineStats {
  promptTokens: number;
  promptMs: number;
  predictedTokens: number;
  predictMs: number;
  /** Decode steps, one per generated token (node-llama-cpp batches slots, so real llama_decode calls may be fewer). */
  decodes: number;
  /** Sum over decode steps of the slots busy at that step. */
  busySlots: number;
  /** Largest prompt evaluated in one go. */
  maxPromptTokens: number;
  processing: number;
  deferred: number;
  /** KV cells held by requests in flight (prompt + generated tokens). */
  kvTokens: number;
  /** All KV cells (slots x context per slot); undefined until the context exists. */
  kvCapacity?: number;
}

/** Zeroed stats for a fresh engine. */
export function emptyStats(): EngineStats {
  return { promptTokens: 0, promptMs: 0, predictedTokens: 0, predictMs: 0, decodes: 0, busySlots: 0, maxPromptTokens: 0, processing: 0, deferred: 0, kvTokens: 0 };
}

function family(name: string, type: MetricType, help: string, value: number): MetricFamily {
  return { name: `llamacpp:${name}`, type, help, samples: [{ name: `llamacpp:${name}`, labels: {}, value }] };
}

/**
 * llama-server's `/metrics` text: the same `llamacpp:` names, HELP lines and types as its
 * handler, plus `kv_cache_usage_ratio`/`kv_cache_tokens` (dropped from llama-server builds in
 * 2025; kept here because llmgw's router scores KV use). Throughputs are lifetime averages,
 * where llama-server averages since the previous scrape. The KV gauges are absent until the context exists.
 */
export function renderMetrics(s: EngineStats): string {
  const families: MetricFamily[] = [
    family('prompt_tokens_total', 'counter', 'Number of prompt tokens processed.', s.promptTokens),
    family('prompt_seconds_total', 'counter', 'Prompt process time', s.promptMs / 1e3),
    family('tokens_predicted_total', 'counter', 'Number of generation tokens processed.', s.predictedTokens),
    family('tokens_predicted_seconds_total', 'counter', 'Predict process time', s.predictMs / 1e3),
    family('n_decode_total', 'counter', 'Total number of llama_decode() calls', s.decodes),
    family('n_tokens_max', 'counter', 'Largest observed n_tokens.', s.maxPromptTokens),
    family('prompt_tokens_seconds', 'gauge', 'Average prompt throughput in tokens/s.', s.promptMs > 0 ? (1e3 * s.promptTokens) / s.promptMs : 0),
    family('predicted_tokens_seconds', 'gauge', 'Average generation throughput in tokens/s.', s.predictMs > 0 ? (1e3 * s.predictedTokens) / s.predictMs : 0),
    family('requests_processing', 'gauge', 'Number of requests processing.', s.processing),
    family('requests_deferred', 'gauge', 'Number of requests deferred.', s.deferred),
    family('n_busy_slots_per_decode', 'gauge', 'Average number of busy slots per llama_decode() call', s.busySlots / Math.max(s.decodes, 1)),
  ];
  if (s.kvCapacity !== undefined && s.kvCapacity > 0) {
    families.push(
      family('kv_cache_usage_ratio', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', Math.min(1, s.kvTokens / s.kvCapacity)),
      family('kv_cache_tokens', 'gauge', 'KV-cache tokens.', s.kvTokens),
    );
  }
  return renderPrometheusText(families);
}
