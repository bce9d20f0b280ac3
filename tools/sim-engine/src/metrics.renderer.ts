import type { SchedulerSnapshot } from './batch.scheduler';

/** A cumulative Prometheus histogram with fixed upper bounds (seconds). */
export class Histogram {
  private readonly counts: number[];
  private total = 0;
  private n = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    for (let i = 0; i < this.bounds.length; i++) if (value <= this.bounds[i]) this.counts[i]++;
    this.total += value;
    this.n++;
  }

  /** Cumulative bucket counts, in bound order; the +Inf bucket is `count`. */
  get buckets(): readonly number[] {
    return this.counts;
  }
  get sum(): number {
    return this.total;
  }
  get count(): number {
    return this.n;
  }
}

/** vLLM's bucket bounds for time to first token (seconds). */
export const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
/** vLLM's bucket bounds for end-to-end request latency (seconds). */
export const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

/** What the server counts per request, beside the scheduler's own state. */
export interface RequestCounters {
  /** Finished requests by reason (`stop`, `length`, `abort`). */
  finished: Record<'stop' | 'length' | 'abort', number>;
  ttft: Histogram;
  e2e: Histogram;
}

export function newRequestCounters(): RequestCounters {
  return { finished: { stop: 0, length: 0, abort: 0 }, ttft: new Histogram(TTFT_BUCKETS), e2e: new Histogram(E2E_BUCKETS) };
}

/** How to render: which engine's names, for which model, with which optional series. */
export interface MetricsOptions {
  modelName: string;
  kvMetric: boolean;
  legacyKvMetric: boolean;
  /** Tokens per KV block, to turn used blocks into llamacpp:kv_cache_tokens. */
  kvBlockSize: number;
}

class Exposition {
  private out = '';
  family(name: string, type: 'gauge' | 'counter' | 'histogram', help: string): this {
    this.out += `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n`;
    return this;
  }
  sample(name: string, labels: Record<string, string>, value: number, format: (v: number) => string): this {
    const keys = Object.keys(labels);
    const body = keys.length === 0 ? '' : `{${keys.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',')}}`;
    this.out += `${name}${body} ${format(value)}\n`;
    return this;
  }
  toString(): string {
    return this.out;
  }
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** Python prometheus_client style, as vLLM prints: integers keep a `.0`. */
function pyFloat(v: number): string {
  if (Number.isInteger(v)) return `${v}.0`;
  return String(v);
}

function plain(v: number): string {
  return String(v);
}

/**
 * vLLM's /metrics (V1 names, `model_name` label plus `engine="0"` as V1 engine cores carry).
 * Gauges reflect the scheduler's state at the moment of the scrape.
 */
export function renderVllmMetrics(s: SchedulerSnapshot, req: RequestCounters, o: MetricsOptions): string {
  const base = { engine: '0', model_name: o.modelName };
  const e = new Exposition();
  e.family('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.').sample('vllm:num_requests_running', base, s.running, pyFloat);
  e.family('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.').sample('vllm:num_requests_waiting', base, s.waiting, pyFloat);
  const kvName = o.legacyKvMetric ? 'vllm:gpu_cache_usage_perc' : 'vllm:kv_cache_usage_perc';
  e.family(kvName, 'gauge', `${o.legacyKvMetric ? 'GPU KV-cache' : 'KV-cache'} usage. 1 means 100 percent usage.`).sample(kvName, base, s.kvUsage, pyFloat);
  e.family('vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.').sample(
    'vllm:prefix_cache_queries_total',
    base,
    s.prefixCacheQueriesTotal,
    pyFloat,
  );
  e.family('vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.').sample(
    'vllm:prefix_cache_hits_total',
    base,
    s.prefixCacheHitsTotal,
    pyFloat,
  );
  e.family('vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.').sample('vllm:num_preemptions_total', base, 0, pyFloat);
  e.family('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.').sample('vllm:prompt_tokens_total', base, s.promptTokensTotal, pyFloat);
  e.family('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.').sample(
    'vllm:generation_tokens_total',
    base,
    s.generationTokensTotal,
    pyFloat,
  );
  e.family('vllm:request_success_total', 'counter', 'Count of successfully processed requests.');
  for (const reason of ['stop', 'length', 'abort'] as const) {
    e.sample('vllm:request_success_total', { ...base, finished_reason: reason }, req.finished[reason], pyFloat);
  }
  histogram(e, 'vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', req.ttft, base);
  histogram(e, 'vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', req.e2e, base);
  return e.toString();
}

function histogram(e: Exposition, name: string, help: string, h: Histogram, labels: Record<string, string>): void {
  e.family(name, 'histogram', help);
  h.bounds.forEach((bound, i) => e.sample(`${name}_bucket`, { ...labels, le: String(bound) }, h.buckets[i], pyFloat));
  e.sample(`${name}_bucket`, { ...labels, le: '+Inf' }, h.count, pyFloat);
  e.sample(`${name}_count`, labels, h.count, pyFloat);
  e.sample(`${name}_sum`, labels, h.sum, pyFloat);
}

/**
 * llama-server's /metrics (no labels, as llama-server prints). The KV series exist only with
 * `kvMetric`: recent llama-server builds dropped them, and absent must stay absent.
 */
export function renderLlamacppMetrics(s: SchedulerSnapshot, o: MetricsOptions): string {
  const e = new Exposition();
  const promptSeconds = s.prefillSecondsTotal;
  const predictedSeconds = s.decodeSecondsTotal;
  e.family('llamacpp:prompt_tokens_total', 'counter', 'Number of prompt tokens processed.').sample('llamacpp:prompt_tokens_total', {}, s.prefillTokensTotal, plain);
  e.family('llamacpp:prompt_seconds_total', 'counter', 'Prompt process time').sample('llamacpp:prompt_seconds_total', {}, round3(promptSeconds), plain);
  e.family('llamacpp:tokens_predicted_total', 'counter', 'Number of generation tokens processed.').sample(
    'llamacpp:tokens_predicted_total',
    {},
    s.generationTokensTotal,
    plain,
  );
  e.family('llamacpp:tokens_predicted_seconds_total', 'counter', 'Predict process time').sample(
    'llamacpp:tokens_predicted_seconds_total',
    {},
    round3(predictedSeconds),
    plain,
  );
  e.family('llamacpp:n_decode_total', 'counter', 'Total number of llama_decode() calls').sample('llamacpp:n_decode_total', {}, s.stepsTotal, plain);
  e.family('llamacpp:n_busy_slots_per_decode', 'gauge', 'Average number of busy slots per llama_decode() call').sample(
    'llamacpp:n_busy_slots_per_decode',
    {},
    s.stepsTotal === 0 ? 0 : round3(s.decodeSlotsTotal / s.stepsTotal),
    plain,
  );
  e.family('llamacpp:prompt_tokens_seconds', 'gauge', 'Average prompt throughput in tokens/s.').sample(
    'llamacpp:prompt_tokens_seconds',
    {},
    promptSeconds === 0 ? 0 : round3(s.prefillTokensTotal / promptSeconds),
    plain,
  );
  e.family('llamacpp:predicted_tokens_seconds', 'gauge', 'Average generation throughput in tokens/s.').sample(
    'llamacpp:predicted_tokens_seconds',
    {},
    predictedSeconds === 0 ? 0 : round3(s.generationTokensTotal / predictedSeconds),
    plain,
  );
  if (o.kvMetric) {
    e.family('llamacpp:kv_cache_usage_ratio', 'gauge', 'KV-cache usage. 1 means 100 percent usage.').sample('llamacpp:kv_cache_usage_ratio', {}, s.kvUsage, plain);
    e.family('llamacpp:kv_cache_tokens', 'gauge', 'KV-cache tokens.').sample('llamacpp:kv_cache_tokens', {}, s.kvUsedBlocks * o.kvBlockSize, plain);
  }
  e.family('llamacpp:requests_processing', 'gauge', 'Number of requests processing.').sample('llamacpp:requests_processing', {}, s.running, plain);
  e.family('llamacpp:requests_deferred', 'gauge', 'Number of requests deferred.').sample('llamacpp:requests_deferred', {}, s.waiting, plain);
  return e.toString();
}

function round3(v: number): number {
  return Math.round(v * 1000) / 1000;
}
