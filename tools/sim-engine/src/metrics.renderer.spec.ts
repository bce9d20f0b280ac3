import { readFileSync } from 'node:fs';
import { fixturePath } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import type { SchedulerSnapshot } from './batch.scheduler';
import { newRequestCounters, renderLlamacppMetrics, renderVllmMetrics } from './metrics.renderer';
import { checkExposition, sampleValue } from './prometheus-text.check';

const snapshot: SchedulerSnapshot = {
  running: 4,
  waiting: 6,
  kvUsedBlocks: 30,
  kvCapacityBlocks: 120,
  kvUsage: 0.25,
  promptTokensTotal: 1000,
  prefillTokensTotal: 800,
  generationTokensTotal: 321,
  prefixCacheQueriesTotal: 1000,
  prefixCacheHitsTotal: 200,
  stepsTotal: 50,
  prefillSecondsTotal: 0.08,
  decodeSecondsTotal: 6.42,
  decodeSlotsTotal: 150,
};
const options = { modelName: 'org/model "x"', kvMetric: false, legacyKvMetric: false, kvBlockSize: 16 };

/** HELP and TYPE lines of a real engine's output, by family. */
function headerLines(fixture: string): Map<string, string[]> {
  const text = readFileSync(fixturePath(fixture), 'utf8');
  const out = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const m = /^# (HELP|TYPE) (\S+)/.exec(line);
    if (m) out.set(m[2], [...(out.get(m[2]) ?? []), line]);
  }
  return out;
}

describe('renderVllmMetrics', () => {
  const counters = newRequestCounters();
  counters.finished.stop = 3;
  counters.ttft.observe(0.015);
  counters.ttft.observe(3);
  counters.e2e.observe(1.2);
  const text = renderVllmMetrics(snapshot, counters, options);
  const { samples, problems } = checkExposition(text);

  it('is valid exposition text', () => {
    expect(problems).toEqual([]);
  });

  it('reports the modelled load under vLLM names with the model_name label', () => {
    const label = { model_name: 'org/model "x"' };
    expect(sampleValue(samples, 'vllm:num_requests_running', label)).toBe(4);
    expect(sampleValue(samples, 'vllm:num_requests_waiting', label)).toBe(6);
    expect(sampleValue(samples, 'vllm:kv_cache_usage_perc', label)).toBe(0.25);
    expect(sampleValue(samples, 'vllm:prompt_tokens_total', label)).toBe(1000);
    expect(sampleValue(samples, 'vllm:generation_tokens_total', label)).toBe(321);
    expect(sampleValue(samples, 'vllm:prefix_cache_hits_total', label)).toBe(200);
    expect(sampleValue(samples, 'vllm:request_success_total', { ...label, finished_reason: 'stop' })).toBe(3);
    expect(sampleValue(samples, 'vllm:time_to_first_token_seconds_bucket', { ...label, le: '0.02' })).toBe(1);
    expect(sampleValue(samples, 'vllm:time_to_first_token_seconds_count', label)).toBe(2);
    expect(text).toContain('vllm:num_requests_running{engine="0",model_name="org/model \\"x\\""} 4.0\n');
  });

  it("uses the real engine's HELP and TYPE lines", () => {
    const real = headerLines('vllm/vllm_docs_design_metrics_example_output.prom');
    expect(real.size).toBeGreaterThanOrEqual(4);
    for (const [family, lines] of real) for (const line of lines) expect(text, family).toContain(`${line}\n`);
  });

  it('names the KV gauge vllm:gpu_cache_usage_perc with --legacy-kv-metric', () => {
    const legacy = checkExposition(renderVllmMetrics(snapshot, newRequestCounters(), { ...options, legacyKvMetric: true }));
    expect(legacy.problems).toEqual([]);
    expect(sampleValue(legacy.samples, 'vllm:gpu_cache_usage_perc')).toBe(0.25);
    expect(sampleValue(legacy.samples, 'vllm:kv_cache_usage_perc')).toBeUndefined();
  });
});

describe('renderLlamacppMetrics', () => {
  it('reports slots busy and deferred requests, and no KV series unless asked', () => {
    const text = renderLlamacppMetrics(snapshot, options);
    const { samples, problems } = checkExposition(text);
    expect(problems).toEqual([]);
    expect(sampleValue(samples, 'llamacpp:requests_processing')).toBe(4);
    expect(sampleValue(samples, 'llamacpp:requests_deferred')).toBe(6);
    expect(sampleValue(samples, 'llamacpp:prompt_tokens_total')).toBe(800);
    expect(sampleValue(samples, 'llamacpp:tokens_predicted_total')).toBe(321);
    expect(samples.some((s) => s.name.startsWith('llamacpp:kv_cache'))).toBe(false);
    expect(samples.every((s) => Object.keys(s.labels).length === 0)).toBe(true);
    const real = headerLines('llamacpp/llama_server_metrics_excerpt.prom');
    for (const lines of real.values()) for (const line of lines) expect(text).toContain(`${line}\n`);
  });

  it('adds llamacpp:kv_cache_usage_ratio and kv_cache_tokens with --kv-metric', () => {
    const { samples, problems } = checkExposition(renderLlamacppMetrics(snapshot, { ...options, kvMetric: true }));
    expect(problems).toEqual([]);
    expect(sampleValue(samples, 'llamacpp:kv_cache_usage_ratio')).toBe(0.25);
    expect(sampleValue(samples, 'llamacpp:kv_cache_tokens')).toBe(480);
  });
});

describe('checkExposition', () => {
  it.each([
    ['# TYPE a gauge\na 1\na 2\n', 'duplicate series'],
    ['a 1\n', 'no TYPE line'],
    ['# TYPE a gauge\na{x="1} 1\n', 'malformed'],
    ['# TYPE a gauge\na one\n', 'bad value'],
    ['# TYPE h histogram\nh_bucket{le="1"} 2\nh_count 2\nh_sum 1\n', 'no +Inf bucket'],
    ['# TYPE a gauge\na 1', 'newline'],
  ])('finds the problem in %j', (text, problem) => {
    expect(checkExposition(text).problems.join('\n')).toContain(problem);
  });
});
