import { API_ENDPOINTS, ENGINE_KINDS, type ApiEndpoint, type EngineKind, type MetricMapping, type Model, type ModelRouting, type Problem, type Profile } from '@llmgw/domain';
import { parseRouting, type RoutingSpec } from './routing-policy.parser';
import { checkProfileRules, modelEndpoints, needsSingleFile } from './engine-capabilities';
import { parseSize } from './size.parser';
import { hostProblem, parseWeightsSource, profileEnvProblem, SOURCE_FORMS } from './source-policy';
import { parseTimeout } from './timeout.parser';
import { child, describe, isRecord, item, suggest, type Json } from './spec-values';

/** A profile as written in a catalog document (sizes may be strings such as `80GB`). */
export interface ProfileSpec {
  engine: EngineKind;
  gpuClass?: string;
  gpusPerNode?: number;
  nodes?: number;
  tensorParallel?: number;
  pipelineParallel?: number;
  memoryPerGpu?: number | string;
  memory?: number | string;
  contextLength?: number;
  parallel?: number;
  args?: string[];
  env?: Record<string, string>;
  /** The API endpoints this profile serves; absent = derived from engine and flags. */
  endpoints?: ApiEndpoint[];
}

export interface MetricMappingSpec {
  running?: string;
  waiting?: string;
  kvUsage?: string[];
  modelLabel?: string;
}

/** A model as written in a catalog document. `replicas: N` means exactly N. */
export interface ModelSpec {
  name: string;
  aliases?: string[];
  source: string;
  size: number | string;
  sha256?: string;
  replicas: number | { min: number; max: number };
  metrics?: MetricMappingSpec;
  /** The API endpoints the model serves; absent = those every profile serves. */
  endpoints?: ApiEndpoint[];
  /** Deadline for a replica's first response byte, e.g. `30s`; absent = the router's default. */
  firstByteTimeout?: string;
  /** Deadline for silence between tokens of a response, e.g. `20s`; absent = the router's default. */
  stallTimeout?: string;
  /** How routers choose a replica; absent = prefix-affinity for chat and completions, least-load for embeddings. */
  routing?: RoutingSpec;
  profiles: ProfileSpec[];
}

/** The catalog document (YAML or JSON, one schema). */
export interface CatalogSpec {
  models: ModelSpec[];
}

const CATALOG_KEYS = ['models'] as const;
const MODEL_KEYS = ['name', 'aliases', 'source', 'size', 'sha256', 'replicas', 'metrics', 'endpoints', 'firstByteTimeout', 'stallTimeout', 'routing', 'profiles'] as const;
const PROFILE_KEYS = [
  'engine',
  'gpuClass',
  'gpusPerNode',
  'nodes',
  'tensorParallel',
  'pipelineParallel',
  'memoryPerGpu',
  'memory',
  'contextLength',
  'parallel',
  'args',
  'env',
  'endpoints',
] as const;
const REPLICAS_KEYS = ['min', 'max'] as const;
const METRICS_KEYS = ['running', 'waiting', 'kvUsage', 'modelLabel'] as const;

/** Served names and aliases: what clients put in `model`. Letters, digits, `._:/-`, ≤ 128. */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const GPU_CLASS_RE = /^[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,63}$/;
const ENV_KEY_RE = /^[A-Z_][A-Z0-9_]*$/;
const METRIC_NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const SHA256_RE = /^[0-9a-fA-F]{64}$/;

/** The result of validating a document: normalised models, or the problems that stop it. */
export interface ValidationResult {
  readonly models: Model[];
  readonly problems: Problem[];
}

/**
 * Checks a parsed catalog document against the schema and the engine rules, collecting every
 * problem with its path (`models[1].profiles[0].gpuClass`). When `problems` is empty, `models`
 * is the normalised catalog: sizes in bytes, defaults filled, `replicas` as `{min, max}`.
 */
export function validateCatalogSpec(spec: unknown): ValidationResult {
  const problems: Problem[] = [];
  const models: Model[] = [];
  if (!isRecord(spec)) {
    problems.push({ path: '', message: `a catalog is a mapping with a "models" list (got ${describe(spec)})` });
    return { models, problems };
  }
  unknownKeys(spec, '', CATALOG_KEYS, problems);
  const list = spec.models;
  if (list === undefined) {
    problems.push({ path: 'models', message: 'required (a list of models, possibly empty)' });
  } else if (!Array.isArray(list)) {
    problems.push({ path: 'models', message: `must be a list (got ${describe(list)})` });
  } else {
    list.forEach((raw, i) => {
      const m = checkModel(raw, item('models', i), problems);
      if (m) models.push(m);
    });
    checkUniqueNames(list, problems);
  }
  return { models, problems };
}

function checkModel(raw: unknown, path: string, problems: Problem[]): Model | undefined {
  if (!isRecord(raw)) {
    problems.push({ path, message: `a model must be a mapping (got ${describe(raw)})` });
    return undefined;
  }
  const before = problems.length;
  unknownKeys(raw, path, MODEL_KEYS, problems);
  const name = checkName(raw.name, child(path, 'name'), problems);
  const aliases: string[] = [];
  if (raw.aliases !== undefined) {
    if (!Array.isArray(raw.aliases)) {
      problems.push({ path: child(path, 'aliases'), message: `must be a list of names (got ${describe(raw.aliases)})` });
    } else {
      raw.aliases.forEach((a, j) => {
        const alias = checkName(a, item(child(path, 'aliases'), j), problems);
        if (alias !== undefined) aliases.push(alias);
      });
    }
  }
  const source = checkSource(raw.source, child(path, 'source'), problems);
  const sizeBytes = requiredSize(raw.size, child(path, 'size'), problems);
  let sha256: string | undefined;
  if (raw.sha256 !== undefined) {
    if (typeof raw.sha256 !== 'string' || !SHA256_RE.test(raw.sha256)) {
      problems.push({ path: child(path, 'sha256'), message: `must be 64 hex digits (got ${describe(raw.sha256)})` });
    } else if (source !== undefined && /^hf:\/\/[^/@]+\/[^/@]+@/.test(source)) {
      problems.push({ path: child(path, 'sha256'), message: 'only for a single-file source; this source names a whole repository' });
    } else {
      sha256 = raw.sha256.toLowerCase();
    }
  }
  const replicas = checkReplicas(raw.replicas, child(path, 'replicas'), problems);
  const metrics = raw.metrics === undefined ? undefined : checkMetrics(raw.metrics, child(path, 'metrics'), problems);
  const endpoints = raw.endpoints === undefined ? undefined : checkEndpoints(raw.endpoints, child(path, 'endpoints'), problems);
  const timeout = (field: 'firstByteTimeout' | 'stallTimeout'): number | undefined => {
    if (raw[field] === undefined) return undefined;
    const r = parseTimeout(raw[field]);
    if (!r.ok) problems.push({ path: child(path, field), message: r.message });
    return r.ok ? r.ms : undefined;
  };
  const firstByteTimeoutMs = timeout('firstByteTimeout');
  const stallTimeoutMs = timeout('stallTimeout');
  let routing: ModelRouting | undefined;
  if (raw.routing !== undefined) {
    const r = parseRouting(raw.routing, child(path, 'routing'));
    if (r.ok) routing = r.routing;
    else problems.push(...r.problems);
  }
  const profiles: Profile[] = [];
  const profilesPath = child(path, 'profiles');
  if (raw.profiles === undefined) {
    problems.push({ path: profilesPath, message: 'required: at least one profile' });
  } else if (!Array.isArray(raw.profiles)) {
    problems.push({ path: profilesPath, message: `must be a list of profiles (got ${describe(raw.profiles)})` });
  } else if (raw.profiles.length === 0) {
    problems.push({ path: profilesPath, message: 'at least one profile is required' });
  } else {
    raw.profiles.forEach((p, j) => {
      const pPath = item(profilesPath, j);
      const profile = checkProfile(p, pPath, problems);
      if (profile && source !== undefined && needsSingleFile(profile.engine, source)) {
        problems.push({
          path: child(pPath, 'engine'),
          message: `${profile.engine} loads one weights file; source names a whole repository (use hf://org/repo/FILE@revision)`,
        });
      }
      if (profile) profiles.push(profile);
    });
    if (endpoints === undefined && profiles.length === raw.profiles.length && modelEndpoints({ profiles }).length === 0) {
      problems.push({
        path: profilesPath,
        message: `the profiles serve no API endpoint in common (${API_ENDPOINTS.join(', ')}); set endpoints on the model or its profiles to say which they serve`,
      });
    }
  }
  if (problems.length > before || name === undefined || source === undefined || sizeBytes === undefined || !replicas) {
    return undefined;
  }
  const model: Model = {
    name,
    aliases,
    source,
    sizeBytes,
    ...(sha256 !== undefined ? { sha256 } : {}),
    replicas,
    profiles,
    ...(metrics !== undefined ? { metrics } : {}),
    ...(endpoints !== undefined ? { endpoints } : {}),
    ...(firstByteTimeoutMs !== undefined ? { firstByteTimeoutMs } : {}),
    ...(stallTimeoutMs !== undefined ? { stallTimeoutMs } : {}),
    ...(routing !== undefined ? { routing } : {}),
  };
  return model;
}

function checkProfile(raw: unknown, path: string, problems: Problem[]): Profile | undefined {
  if (!isRecord(raw)) {
    problems.push({ path, message: `a profile must be a mapping (got ${describe(raw)})` });
    return undefined;
  }
  unknownKeys(raw, path, PROFILE_KEYS, problems);
  const invalid = new Set<string>();
  const note = (field: string, message: string, at = child(path, field)) => {
    invalid.add(field);
    problems.push({ path: at, message });
  };

  let engine: EngineKind | undefined;
  if (raw.engine === undefined) note('engine', `required: one of ${ENGINE_KINDS.join(', ')}`);
  else if (typeof raw.engine !== 'string' || !(ENGINE_KINDS as readonly string[]).includes(raw.engine)) {
    note('engine', `must be one of ${ENGINE_KINDS.join(', ')} (got ${describe(raw.engine)})`);
  } else engine = raw.engine as EngineKind;

  let gpuClass: string | undefined;
  if (raw.gpuClass !== undefined) {
    if (typeof raw.gpuClass !== 'string' || !GPU_CLASS_RE.test(raw.gpuClass)) {
      note('gpuClass', `must be a GPU class name such as "H100-80GB" (got ${describe(raw.gpuClass)}); omit it to run on CPU`);
    } else gpuClass = raw.gpuClass;
  }
  const int = (field: string, min: number, fallback: number): number => {
    const v = raw[field];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
      note(field, `must be a whole number ≥ ${min} (got ${describe(v)})`);
      return fallback;
    }
    return v;
  };
  const gpusPerNode = int('gpusPerNode', 0, raw.gpuClass !== undefined ? 1 : 0);
  const nodes = int('nodes', 1, 1);
  const tensorParallel = int('tensorParallel', 1, 1);
  const pipelineParallel = int('pipelineParallel', 1, 1);
  const optionalInt = (field: string): number | undefined => (raw[field] === undefined ? undefined : int(field, 1, 0) || undefined);
  const contextLength = optionalInt('contextLength');
  const parallel = optionalInt('parallel');
  const size = (field: string): number => {
    if (raw[field] === undefined) return 0;
    const r = parseSize(raw[field]);
    if (!r.ok) {
      note(field, r.message);
      return 0;
    }
    return r.bytes;
  };
  const memoryPerGpuBytes = size('memoryPerGpu');
  const memoryBytes = size('memory');

  const args: string[] = [];
  if (raw.args !== undefined) {
    if (!Array.isArray(raw.args)) {
      note('args', `must be a list of strings, one argv element each (got ${describe(raw.args)})`);
    } else {
      raw.args.forEach((a, k) => {
        const at = item(child(path, 'args'), k);
        if (typeof a !== 'string') note('args', `must be a string (got ${describe(a)}); quote numbers`, at);
        else if (a.includes('\0')) note('args', 'must not contain a NUL character', at);
        else args.push(a);
      });
    }
  }
  const env: Record<string, string> = {};
  if (raw.env !== undefined) {
    if (!isRecord(raw.env)) {
      note('env', `must be a mapping of NAME: value (got ${describe(raw.env)})`);
    } else {
      for (const [k, v] of Object.entries(raw.env)) {
        const at = child(child(path, 'env'), k);
        const denied = ENV_KEY_RE.test(k) ? profileEnvProblem(k) : undefined;
        if (!ENV_KEY_RE.test(k)) note('env', 'variable names match [A-Z_][A-Z0-9_]*', at);
        else if (denied !== undefined) note('env', denied, at);
        else if (typeof v !== 'string') note('env', `must be a string (got ${describe(v)}); quote it`, at);
        else if (v.includes('\0')) note('env', 'must not contain a NUL character', at);
        else env[k] = v;
      }
    }
  }
  const endpoints = raw.endpoints === undefined ? undefined : checkEndpoints(raw.endpoints, child(path, 'endpoints'), problems);
  if (engine === undefined) return undefined;

  const profile: Profile = {
    engine,
    ...(gpuClass !== undefined ? { gpuClass } : {}),
    gpusPerNode,
    nodes,
    tensorParallel,
    pipelineParallel,
    memoryPerGpuBytes,
    memoryBytes,
    ...(contextLength !== undefined ? { contextLength } : {}),
    ...(parallel !== undefined ? { parallel } : {}),
    args,
    env,
    ...(endpoints !== undefined ? { endpoints } : {}),
  };
  for (const p of checkProfileRules(profile, invalid)) {
    problems.push({ path: p.path === '' ? path : `${path}.${p.path}`, message: p.message });
  }
  return profile;
}

/** A non-empty list of distinct API endpoints, kept in API_ENDPOINTS order. */
function checkEndpoints(raw: unknown, path: string, problems: Problem[]): ApiEndpoint[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) {
    problems.push({ path, message: `must be a non-empty list of ${API_ENDPOINTS.join(', ')} (got ${describe(raw)})` });
    return undefined;
  }
  const before = problems.length;
  const seen = new Set<string>();
  raw.forEach((e, i) => {
    if (typeof e !== 'string' || !(API_ENDPOINTS as readonly string[]).includes(e)) {
      problems.push({ path: item(path, i), message: `must be one of ${API_ENDPOINTS.join(', ')} (got ${describe(e)})` });
    } else if (seen.has(e)) {
      problems.push({ path: item(path, i), message: `${e} is listed twice` });
    } else seen.add(e);
  });
  return problems.length > before ? undefined : API_ENDPOINTS.filter((e) => seen.has(e));
}

function checkName(raw: unknown, path: string, problems: Problem[]): string | undefined {
  if (raw === undefined) {
    problems.push({ path, message: 'required' });
    return undefined;
  }
  if (typeof raw !== 'string' || !NAME_RE.test(raw) || raw.includes('..') || raw.endsWith('/')) {
    problems.push({
      path,
      message: `${describe(raw)} is not a valid name: 1-128 of letters, digits and . _ : / -, starting with a letter or digit`,
    });
    return undefined;
  }
  return raw;
}

function checkSource(raw: unknown, path: string, problems: Problem[]): string | undefined {
  if (raw === undefined) {
    problems.push({ path, message: `required: ${SOURCE_FORMS}` });
    return undefined;
  }
  if (typeof raw !== 'string') {
    problems.push({ path, message: `must be a string: ${SOURCE_FORMS} (got ${describe(raw)})` });
    return undefined;
  }
  const parsed = parseWeightsSource(raw);
  if (!parsed.ok) {
    problems.push({ path, message: `${describe(raw)} ${parsed.reason}` });
    return undefined;
  }
  const host = parsed.source.kind === 'http' ? parsed.source.host : undefined;
  const hostRefused = host === undefined ? undefined : hostProblem(host);
  if (hostRefused !== undefined) {
    problems.push({ path, message: `${describe(raw)}: host ${host} ${hostRefused}; name a host that the agents' source policy allows` });
    return undefined;
  }
  return raw;
}

function requiredSize(raw: unknown, path: string, problems: Problem[]): number | undefined {
  if (raw === undefined) {
    problems.push({ path, message: 'required: bytes or a size like "16GB"' });
    return undefined;
  }
  const r = parseSize(raw);
  if (!r.ok) {
    problems.push({ path, message: r.message });
    return undefined;
  }
  return r.bytes;
}

/**
 * Most replicas one model may ask for (`replicas` or `replicas.max`). Far beyond any fleet this
 * runs on; a typo such as `1e9` is refused here instead of being placed until nodes run out.
 */
export const MAX_REPLICAS = 1000;

function checkReplicas(raw: unknown, path: string, problems: Problem[]): { min: number; max: number } | undefined {
  const count = (v: unknown, p: string): number | undefined => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
      problems.push({ path: p, message: `must be a whole number ≥ 0 (got ${describe(v)})` });
      return undefined;
    }
    if (v > MAX_REPLICAS) {
      problems.push({ path: p, message: `must be at most ${MAX_REPLICAS} replicas (got ${v})` });
      return undefined;
    }
    return v;
  };
  if (raw === undefined) {
    problems.push({ path, message: 'required: a count or {min, max}' });
    return undefined;
  }
  if (typeof raw === 'number') {
    const n = count(raw, path);
    return n === undefined ? undefined : { min: n, max: n };
  }
  if (!isRecord(raw)) {
    problems.push({ path, message: `must be a count or {min, max} (got ${describe(raw)})` });
    return undefined;
  }
  unknownKeys(raw, path, REPLICAS_KEYS, problems);
  const min = raw.min === undefined ? missing(child(path, 'min'), problems) : count(raw.min, child(path, 'min'));
  const max = raw.max === undefined ? missing(child(path, 'max'), problems) : count(raw.max, child(path, 'max'));
  if (min === undefined || max === undefined) return undefined;
  if (min > max) {
    problems.push({ path: child(path, 'min'), message: `must not exceed max (${min} > ${max})` });
    return undefined;
  }
  return { min, max };
}

function checkMetrics(raw: unknown, path: string, problems: Problem[]): MetricMapping | undefined {
  if (!isRecord(raw)) {
    problems.push({ path, message: `must be a mapping of running, waiting, kvUsage, modelLabel (got ${describe(raw)})` });
    return undefined;
  }
  unknownKeys(raw, path, METRICS_KEYS, problems);
  const mapping: MetricMapping = {};
  const metricName = (v: unknown, p: string): string | undefined => {
    if (typeof v !== 'string' || !METRIC_NAME_RE.test(v)) {
      problems.push({ path: p, message: `must be a Prometheus metric name (got ${describe(v)})` });
      return undefined;
    }
    return v;
  };
  if (raw.running !== undefined) mapping.running = metricName(raw.running, child(path, 'running'));
  if (raw.waiting !== undefined) mapping.waiting = metricName(raw.waiting, child(path, 'waiting'));
  if (raw.kvUsage !== undefined) {
    if (!Array.isArray(raw.kvUsage)) {
      problems.push({ path: child(path, 'kvUsage'), message: `must be a list of metric names in preference order (got ${describe(raw.kvUsage)})` });
    } else {
      mapping.kvUsage = raw.kvUsage.map((v, k) => metricName(v, item(child(path, 'kvUsage'), k))).filter((v): v is string => v !== undefined);
    }
  }
  if (raw.modelLabel !== undefined) {
    if (typeof raw.modelLabel !== 'string' || !LABEL_NAME_RE.test(raw.modelLabel) || raw.modelLabel === '__name__') {
      problems.push({ path: child(path, 'modelLabel'), message: `must be a Prometheus label name (got ${describe(raw.modelLabel)})` });
    } else mapping.modelLabel = raw.modelLabel;
  }
  // An empty mapping says nothing: the engine's default applies.
  return Object.keys(mapping).length === 0 ? undefined : mapping;
}

/** Names and aliases resolve to one model each: a duplicate anywhere is a problem at its second use. */
function checkUniqueNames(list: readonly unknown[], problems: Problem[]): void {
  const names = new Map<string, number>();
  list.forEach((raw, i) => {
    if (!isRecord(raw) || typeof raw.name !== 'string') return;
    const first = names.get(raw.name);
    if (first !== undefined) {
      problems.push({ path: child(item('models', i), 'name'), message: `${JSON.stringify(raw.name)} is already the name of models[${first}]` });
    } else names.set(raw.name, i);
  });
  const aliases = new Map<string, number>();
  list.forEach((raw, i) => {
    if (!isRecord(raw) || !Array.isArray(raw.aliases)) return;
    raw.aliases.forEach((a, j) => {
      if (typeof a !== 'string') return;
      const path = item(child(item('models', i), 'aliases'), j);
      const owner = names.get(a);
      const aliasOwner = aliases.get(a);
      if (owner === i) problems.push({ path, message: `${JSON.stringify(a)} is this model's own name` });
      else if (owner !== undefined) problems.push({ path, message: `${JSON.stringify(a)} is the name of models[${owner}]` });
      else if (aliasOwner === i) problems.push({ path, message: `${JSON.stringify(a)} is listed twice` });
      else if (aliasOwner !== undefined) problems.push({ path, message: `${JSON.stringify(a)} is already an alias of models[${aliasOwner}]` });
      else aliases.set(a, i);
    });
  });
}

function missing(path: string, problems: Problem[]): undefined {
  problems.push({ path, message: 'required' });
  return undefined;
}

function unknownKeys(raw: Json, path: string, allowed: readonly string[], problems: Problem[]): void {
  for (const key of Object.keys(raw)) {
    if (allowed.includes(key)) continue;
    const hint = suggest(key, allowed);
    problems.push({ path: child(path, key), message: `unknown field${hint ? ` (did you mean ${hint}?)` : ''}` });
  }
}
