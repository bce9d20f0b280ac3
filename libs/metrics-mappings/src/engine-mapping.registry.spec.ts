import { DomainError, ErrorCode, type EngineKind, type MetricMapping } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { defaultMapping, mappingProblems, resolveMapping } from './engine-mapping.registry';

const VLLM: MetricMapping = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
  kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
  modelLabel: 'model_name',
};
const LLAMACPP: MetricMapping = {
  running: 'llamacpp:requests_processing',
  waiting: 'llamacpp:requests_deferred',
  kvUsage: ['llamacpp:kv_cache_usage_ratio'],
};

describe('defaultMapping', () => {
  it.each<[EngineKind, MetricMapping]>([
    ['vllm', VLLM],
    ['llamacpp', LLAMACPP],
  ])('%s uses its own names', (engine, want) => {
    expect(defaultMapping(engine)).toEqual(want);
    expect(Object.isFrozen(defaultMapping(engine))).toBe(true);
    expect(Object.isFrozen(defaultMapping(engine).kvUsage)).toBe(true);
  });

  it('names no other engine: llama.cpp has no vllm: name and no model label', () => {
    expect(JSON.stringify(defaultMapping('llamacpp'))).not.toContain('vllm:');
    expect(defaultMapping('llamacpp').modelLabel).toBeUndefined();
  });

  it('refuses an unknown engine with a DomainError naming it', () => {
    expect(() => defaultMapping('tgi' as EngineKind)).toThrow(/unknown engine 'tgi'/);
    expect(() => defaultMapping('__proto__' as EngineKind)).toThrow(DomainError);
  });
});

describe('resolveMapping', () => {
  it.each<[string, EngineKind, MetricMapping | undefined, MetricMapping]>([
    ['no override → vLLM default', 'vllm', undefined, VLLM],
    ['no override → llama.cpp default', 'llamacpp', undefined, LLAMACPP],
    ['empty override → the engine default', 'llamacpp', {}, LLAMACPP],
    ['override of blanks only → the engine default', 'vllm', { running: '', waiting: '', kvUsage: [], modelLabel: '' }, VLLM],
    // A mapping that names its own running is a complete statement: blanks stay blank.
    ['running only → nothing else', 'vllm', { running: 'my:running' }, { running: 'my:running' }],
    ['running only on llama.cpp → nothing else', 'llamacpp', { running: 'my:running' }, { running: 'my:running' }],
    [
      'running + kvUsage → no waiting, no model label',
      'vllm',
      { running: 'my:running', waiting: '', kvUsage: ['my:kv'] },
      { running: 'my:running', kvUsage: ['my:kv'] },
    ],
    [
      'complete statement with every field',
      'llamacpp',
      { running: 'a:r', waiting: 'a:w', kvUsage: ['a:k1', 'a:k2'], modelLabel: 'served' },
      { running: 'a:r', waiting: 'a:w', kvUsage: ['a:k1', 'a:k2'], modelLabel: 'served' },
    ],
    // Without running: a patch of the same engine's default.
    ['modelLabel only → vLLM default with that label', 'vllm', { modelLabel: 'served_model' }, { ...VLLM, modelLabel: 'served_model' }],
    ['kvUsage only → llama.cpp default with that list', 'llamacpp', { kvUsage: ['x:kv'] }, { ...LLAMACPP, kvUsage: ['x:kv'] }],
    ['waiting only → vLLM default with that waiting', 'vllm', { waiting: 'x:w' }, { ...VLLM, waiting: 'x:w' }],
  ])('%s', (_title, engine, override, want) => {
    const got = resolveMapping(engine, override);
    expect(got).toEqual(want);
    expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort()); // blank fields are absent, not undefined-valued
    expect(Object.isFrozen(got)).toBe(true);
  });

  it('a patch never brings in another engine’s names', () => {
    expect(JSON.stringify(resolveMapping('llamacpp', { waiting: 'x:w', modelLabel: 'm' }))).not.toContain('vllm:');
  });

  it('does not share or mutate the override or the default', () => {
    const kv = ['a:k'];
    const got = resolveMapping('vllm', { running: 'a:r', kvUsage: kv });
    kv.push('b:k');
    expect(got.kvUsage).toEqual(['a:k']);
    expect(defaultMapping('vllm')).toEqual(VLLM);
  });

  it('refuses invalid names with every problem and its path', () => {
    let err: unknown;
    try {
      resolveMapping('vllm', { running: 'bad name', kvUsage: ['ok:name', '9bad'], modelLabel: 'a:b' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe(ErrorCode.InvalidArgument);
    expect((err as DomainError).problems.map((p) => p.path)).toEqual(['metrics.running', 'metrics.kvUsage[1]', 'metrics.modelLabel']);
  });

  it('mappingProblems takes a path prefix and passes valid mappings', () => {
    expect(mappingProblems(VLLM)).toEqual([]);
    expect(mappingProblems({ waiting: 'x y' }, 'models[0].metrics')).toEqual([{ path: 'models[0].metrics.waiting', message: 'not a metric name: "x y"' }]);
  });
});
