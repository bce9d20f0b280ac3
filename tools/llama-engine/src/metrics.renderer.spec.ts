import { readFileSync } from 'node:fs';
import { parsePrometheusText } from '@llmgw/metrics-mappings';
import { fixturePath } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { emptyStats, renderMetrics } from './metrics.renderer';

describe('renderMetrics', () => {
  it('uses the names, types and HELP texts of a real llama-server /metrics scrape', () => {
    const real = parsePrometheusText(readFileSync(fixturePath('llamacpp', 'llama_server_metrics_excerpt.prom'), 'utf8'));
    expect(real.length).toBeGreaterThan(0);
    const ours = new Map(parsePrometheusText(renderMetrics(emptyStats())).map((f) => [f.name, f]));
    for (const family of real) expect(ours.get(family.name), family.name).toMatchObject({ type: family.type, help: family.help });
  });

  it('reports load, averages and KV use; the KV gauges are absent until the context exists', () => {
    const stats = { ...emptyStats(), promptTokens: 100, promptMs: 50, predictedTokens: 30, predictMs: 300, decodes: 30, busySlots: 45, processing: 2, deferred: 3, kvTokens: 512 };
    const value = (text: string, name: string) => parsePrometheusText(text).find((f) => f.name === name)?.samples[0].value;
    const before = renderMetrics(stats);
    expect(value(before, 'llamacpp:kv_cache_usage_ratio')).toBeUndefined();
    const text = renderMetrics({ ...stats, kvCapacity: 2048 });
    expect(value(text, 'llamacpp:requests_processing')).toBe(2);
    expect(value(text, 'llamacpp:requests_deferred')).toBe(3);
    expect(value(text, 'llamacpp:prompt_seconds_total')).toBe(0.05);
    expect(value(text, 'llamacpp:prompt_tokens_seconds')).toBe(2000);
    expect(value(text, 'llamacpp:predicted_tokens_seconds')).toBe(100);
    expect(value(text, 'llamacpp:n_busy_slots_per_decode')).toBe(1.5);
    expect(value(text, 'llamacpp:kv_cache_usage_ratio')).toBe(0.25);
  });
});
