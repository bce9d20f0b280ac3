import { readFileSync } from 'node:fs';
import { fixturesDir } from '@llmgw/testing';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultMapping, resolveMapping } from './engine-mapping.registry';
import { parseAndRead, readLoad, wantsSlots, withSlots } from './engine-load.reader';
import { PrometheusParseError, parsePrometheusText } from './prometheus-text.parser';

const FIXTURES = fixturesDir();
const read = (rel: string): string => readFileSync(join(FIXTURES, rel), 'utf8');

/** The vLLM docs sample without the doc's `$ curl` line and `...` elisions. */
const VLLM_DOCS = read('vllm/vllm_docs_design_metrics_example_output.prom')
  .split('\n')
  .filter((l) => l !== '...' && !l.startsWith('$ curl'))
  .join('\n');
const LLAMACPP_EXCERPT = read('llamacpp/llama_server_metrics_excerpt.prom');

/** Hand-made in vLLM v1's shape: one series per engine core (data parallel 2), one served name. */
const VLLM_V1_TWO_ENGINES = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama-8b"} 3.0
vllm:num_requests_running{engine="1",model_name="llama-8b"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama-8b"} 0.0
vllm:num_requests_waiting{engine="1",model_name="llama-8b"} 2.0
# HELP vllm:kv_cache_usage_perc KV-Cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama-8b"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="llama-8b"} 0.75
`;

/** Hand-made: one engine process serving two names. */
const VLLM_TWO_NAMES = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="base"} 5
vllm:num_requests_running{engine="0",model_name="base-lora"} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="base"} 1
vllm:num_requests_waiting{engine="0",model_name="base-lora"} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="base"} 0.5
`;

/** Hand-made in the shape of vLLM before 0.9: the old KV name, no engine label. */
const VLLM_OLD = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 0.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.4
`;

/** Hand-made in the shape of an older llama-server with the KV metrics, printing -nan as old builds did. */
const LLAMACPP_OLD = `# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio -nan
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
`;

describe('readLoad on real scrapes', () => {
  it('vLLM docs sample: running read, waiting and kvUsage absent (not 0)', () => {
    const load = readLoad(VLLM_DOCS, defaultMapping('vllm'));
    expect(load.running).toBe(8);
    expect(load.waiting).toBeUndefined();
    expect(load.kvUsage).toBeUndefined();
    expect(load).toEqual({ running: 8 });
    expect(Object.keys(load)).toEqual(['running']);
  });

  it('vLLM docs sample with the model filter: its own name counts, another name reads absent', () => {
    expect(readLoad(VLLM_DOCS, defaultMapping('vllm'), { modelName: 'meta-llama/Llama-3.1-8B-Instruct' }).running).toBe(8);
    expect(readLoad(VLLM_DOCS, defaultMapping('vllm'), { modelName: 'someone-else' }).running).toBeUndefined();
  });

  it('llama.cpp excerpt (a build without KV metrics, cut before the gauges): everything absent', () => {
    const load = parseAndRead(LLAMACPP_EXCERPT, 'llamacpp');
    expect(load.running).toBeUndefined();
    expect(load.waiting).toBeUndefined();
    expect(load.kvUsage).toBeUndefined();
    expect(load).toEqual({});
  });

  it('llama.cpp excerpt read with vLLM names finds nothing either: no cross-engine guessing', () => {
    expect(parseAndRead(LLAMACPP_EXCERPT, 'vllm')).toEqual({});
  });
});

describe('readLoad on hand-made scrapes', () => {
  it('vLLM v1: series that differ only by the engine label are summed; KV is their mean', () => {
    expect(parseAndRead(VLLM_V1_TWO_ENGINES, 'vllm')).toEqual({ running: 7, waiting: 2, kvUsage: 0.5 });
  });

  it('a reported 0 stays 0', () => {
    const text = 'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0\nvllm:kv_cache_usage_perc 0\n';
    const load = parseAndRead(text, 'vllm');
    expect(load.waiting).toBe(0);
    expect(load.kvUsage).toBe(0);
    expect(load.running).toBeUndefined();
  });

  it('model_name filter: one engine serving two names', () => {
    expect(parseAndRead(VLLM_TWO_NAMES, 'vllm')).toEqual({ running: 7, waiting: 1, kvUsage: 0.5 });
    expect(parseAndRead(VLLM_TWO_NAMES, 'vllm', undefined, { modelName: 'base' })).toEqual({ running: 5, waiting: 1, kvUsage: 0.5 });
    const lora = parseAndRead(VLLM_TWO_NAMES, 'vllm', undefined, { modelName: 'base-lora' });
    expect(lora).toEqual({ running: 2, waiting: 0 });
    expect(lora.kvUsage).toBeUndefined();
  });

  it('model filter does not apply to series that carry no model label', () => {
    const text = 'vllm:num_requests_running 4\n';
    expect(parseAndRead(text, 'vllm', undefined, { modelName: 'x' }).running).toBe(4);
  });

  it('model filter needs a model label in the mapping (llama.cpp has none)', () => {
    const text = 'llamacpp:requests_processing{model_name="other"} 3\n';
    expect(parseAndRead(text, 'llamacpp', undefined, { modelName: 'x' }).running).toBe(3);
  });

  it('old vLLM: gpu_cache_usage_perc is the fallback for kv_cache_usage_perc', () => {
    expect(parseAndRead(VLLM_OLD, 'vllm')).toEqual({ running: 1, waiting: 0, kvUsage: 0.4 });
  });

  it('when both KV names are present the newer one wins', () => {
    const text = 'vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.1\n';
    expect(parseAndRead(text, 'vllm').kvUsage).toBe(0.1);
  });

  it('old llama.cpp: -nan KV reads absent, the counts are read', () => {
    const load = parseAndRead(LLAMACPP_OLD, 'llamacpp');
    expect(load).toEqual({ running: 2, waiting: 1 });
    expect(load.kvUsage).toBeUndefined();
  });

  it('a newer llama.cpp without kv_cache_usage_ratio: kvUsage absent', () => {
    const text = 'llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\n';
    const load = parseAndRead(text, 'llamacpp');
    expect(load).toEqual({ running: 0, waiting: 0 });
    expect(load.kvUsage).toBeUndefined();
  });

  it.each([
    ['NaN', 'vllm:num_requests_running NaN\n'],
    ['+Inf', 'vllm:num_requests_running +Inf\n'],
    ['negative', 'vllm:num_requests_running -1\n'],
    ['one NaN engine among two', 'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_running{engine="1"} NaN\n'],
  ])('an unusable running (%s) reads absent, not 0', (_t, text) => {
    expect(parseAndRead(text, 'vllm').running).toBeUndefined();
  });

  it('kvUsage is clamped to at most 1; a negative one reads absent', () => {
    expect(parseAndRead('vllm:kv_cache_usage_perc 1.0000001\n', 'vllm').kvUsage).toBe(1);
    expect(parseAndRead('vllm:kv_cache_usage_perc -0.5\n', 'vllm').kvUsage).toBeUndefined();
  });

  it('the first present KV name wins even when its value is unusable (no silent switch to an older metric)', () => {
    expect(parseAndRead('vllm:kv_cache_usage_perc NaN\nvllm:gpu_cache_usage_perc 0.3\n', 'vllm').kvUsage).toBeUndefined();
  });

  it('a metric that is a histogram part (_sum/_count) can be mapped', () => {
    const text = '# TYPE q histogram\nq_bucket{le="+Inf"} 4\nq_sum 10\nq_count 4\n';
    expect(readLoad(text, { running: 'q_count', waiting: 'q_sum' })).toEqual({ running: 4, waiting: 10 });
  });

  it('accepts parsed families as well as text', () => {
    const fams = parsePrometheusText(VLLM_V1_TWO_ENGINES);
    expect(readLoad(fams, defaultMapping('vllm'))).toEqual(readLoad(VLLM_V1_TWO_ENGINES, defaultMapping('vllm')));
  });

  it('unparsable text throws PrometheusParseError naming the line', () => {
    expect(() => parseAndRead('ok 1\nbad{ 1\n', 'vllm')).toThrow(PrometheusParseError);
    expect(() => parseAndRead('ok 1\nbad{ 1\n', 'vllm')).toThrow(/^line 2: /);
  });
});

describe('override completeness when reading', () => {
  it('a mapping that names its own running leaves the rest blank even when vLLM names are in the scrape', () => {
    const text = VLLM_V1_TWO_ENGINES + 'custom:inflight 9\n';
    const load = parseAndRead(text, 'vllm', { running: 'custom:inflight' });
    expect(load.running).toBe(9);
    expect(load.waiting).toBeUndefined();
    expect(load.kvUsage).toBeUndefined();
  });

  it('a patch without running keeps the engine’s own names for the rest', () => {
    const text = VLLM_V1_TWO_ENGINES + 'custom:kv 0.9\n';
    expect(parseAndRead(text, 'vllm', { kvUsage: ['custom:kv'] })).toEqual({ running: 7, waiting: 2, kvUsage: 0.9 });
  });

  it('a blank mapping reads nothing', () => {
    expect(readLoad(VLLM_V1_TWO_ENGINES, resolveMapping('vllm', { running: 'absent:metric' }))).toEqual({});
  });
});

describe('/slots beside /metrics', () => {
  it.each([
    ['llama.cpp without KV usage (current builds)', 'llamacpp', { running: 1 }, true],
    ['llama.cpp with nothing read', 'llamacpp', {}, true],
    ['llama.cpp with KV usage (older builds, --kv-metric)', 'llamacpp', { running: 1, kvUsage: 0.5 }, false],
    ['vLLM without KV usage', 'vllm', { running: 1 }, false],
  ] as const)('wantsSlots: %s → %s', (_name, engine, load, wanted) => {
    expect(wantsSlots(engine, load)).toBe(wanted);
  });

  it('the llama.cpp excerpt (no KV gauge) wants /slots', () => {
    expect(wantsSlots('llamacpp', parseAndRead(LLAMACPP_EXCERPT, 'llamacpp'))).toBe(true);
  });

  it.each([
    ['fills running and capacity when /metrics had neither', {}, { running: 3, capacity: 4 }],
    ["keeps /metrics' running and adds capacity", { running: 2, waiting: 5 }, { running: 2, waiting: 5, capacity: 4 }],
    ["keeps /metrics' running of 0 (known, not absent)", { running: 0 }, { running: 0, capacity: 4 }],
  ])('withSlots %s', (_name, load, expected) => {
    expect(withSlots(load, { running: 3, capacity: 4 })).toEqual(expected);
  });
});
