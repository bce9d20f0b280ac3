import { DomainError, ENGINE_KINDS, ErrorCode, type EngineKind, type MetricMapping, type Problem } from '@llmgw/domain';

function frozen(m: MetricMapping): MetricMapping {
  if (m.kvUsage !== undefined) Object.freeze(m.kvUsage);
  return Object.freeze(m);
}

/**
 * Each engine's own metric names — the one place they are written down.
 * vLLM: `kv_cache_usage_perc` is a 0..1 fraction despite its name ("1 means 100 percent");
 * `gpu_cache_usage_perc` is its pre-0.9 name, read when the new one is absent.
 * llama.cpp: `kv_cache_usage_ratio` is gone from builds since 2025; then kvUsage is absent.
 */
const DEFAULTS: Readonly<Record<EngineKind, MetricMapping>> = Object.freeze({
  vllm: frozen({
    running: 'vllm:num_requests_running',
    waiting: 'vllm:num_requests_waiting',
    kvUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    modelLabel: 'model_name',
  }),
  llamacpp: frozen({
    running: 'llamacpp:requests_processing',
    waiting: 'llamacpp:requests_deferred',
    kvUsage: ['llamacpp:kv_cache_usage_ratio'],
  }),
});

/** The engine's default mapping (frozen). Throws a DomainError for an engine llmgw does not know. */
export function defaultMapping(engine: EngineKind): MetricMapping {
  const m = Object.prototype.hasOwnProperty.call(DEFAULTS, engine) ? DEFAULTS[engine] : undefined;
  if (m === undefined) {
    throw new DomainError(ErrorCode.InvalidArgument, `unknown engine '${String(engine)}' (known: ${ENGINE_KINDS.join(', ')})`, [
      { path: 'engine', message: `unknown engine '${String(engine)}'` },
    ]);
  }
  return m;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function blank(s: string | undefined): boolean {
  return s === undefined || s === '';
}

/** Every problem with a mapping's names, each with its path under `path` (e.g. `metrics.kvUsage[1]`). */
export function mappingProblems(mapping: MetricMapping, path = 'metrics'): Problem[] {
  const problems: Problem[] = [];
  const metric = (v: unknown, p: string): void => {
    if (v === undefined || v === '') return;
    if (typeof v !== 'string' || !METRIC_NAME.test(v)) problems.push({ path: p, message: `not a metric name: ${JSON.stringify(v)}` });
  };
  metric(mapping.running, `${path}.running`);
  metric(mapping.waiting, `${path}.waiting`);
  if (mapping.kvUsage !== undefined) {
    if (!Array.isArray(mapping.kvUsage)) problems.push({ path: `${path}.kvUsage`, message: 'must be a list of metric names' });
    else
      mapping.kvUsage.forEach((n: unknown, i: number) => {
        if (n === '' || typeof n !== 'string' || !METRIC_NAME.test(n)) problems.push({ path: `${path}.kvUsage[${i}]`, message: `not a metric name: ${JSON.stringify(n)}` });
      });
  }
  const ml: unknown = mapping.modelLabel;
  if (ml !== undefined && ml !== '' && (typeof ml !== 'string' || !LABEL_NAME.test(ml) || ml === '__name__')) {
    problems.push({ path: `${path}.modelLabel`, message: `not a label name: ${JSON.stringify(ml)}` });
  }
  return problems;
}

/**
 * The mapping an endpoint of `engine` is read with, given a profile/model override:
 * - none, or one that sets nothing → the engine's default;
 * - one that names its own `running` → a complete statement: taken as written, and the fields
 *   it leaves blank stay blank (never filled with default names the engine may not have);
 * - one without `running` but with other fields → a patch of *this engine's* default: the
 *   fields it sets replace the default's, the rest keep the engine's own names. (To switch a
 *   metric off, write a complete statement.)
 * Blank means undefined or '' (and an empty kvUsage list). Throws a DomainError listing every
 * invalid name. The result is frozen.
 */
export function resolveMapping(engine: EngineKind, override?: MetricMapping): MetricMapping {
  const base = defaultMapping(engine);
  if (override === undefined || override === null) return base;
  const problems = mappingProblems(override);
  if (problems.length > 0) {
    throw new DomainError(
      ErrorCode.InvalidArgument,
      `invalid metric mapping for engine ${engine}: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
      problems,
    );
  }
  const kv = override.kvUsage !== undefined && override.kvUsage.length > 0 ? [...override.kvUsage] : undefined;
  const setsSomething = !blank(override.running) || !blank(override.waiting) || kv !== undefined || !blank(override.modelLabel);
  if (!setsSomething) return base;
  if (!blank(override.running)) {
    const complete: MetricMapping = { running: override.running };
    if (!blank(override.waiting)) complete.waiting = override.waiting;
    if (kv !== undefined) complete.kvUsage = kv;
    if (!blank(override.modelLabel)) complete.modelLabel = override.modelLabel;
    return frozen(complete);
  }
  const patched: MetricMapping = { ...base, kvUsage: base.kvUsage === undefined ? undefined : [...base.kvUsage] };
  if (patched.kvUsage === undefined) delete patched.kvUsage;
  if (!blank(override.waiting)) patched.waiting = override.waiting;
  if (kv !== undefined) patched.kvUsage = kv;
  if (!blank(override.modelLabel)) patched.modelLabel = override.modelLabel;
  return frozen(patched);
}
