import { MAX_KEY_LIMIT, type KeyLimits, type Problem } from '@llmgw/domain';

/** What an operator declares for an API key; the secret is the server's to make. */
export interface ApiKeySpec {
  readonly name: string;
  /** The owner or team the key belongs to (shown in usage). */
  readonly owner: string;
  /** Model names or aliases the key may use; `*` is every model, `prefix*` every model so named. */
  readonly models: readonly string[];
  readonly limits: KeyLimits;
  /** When the key stops working (ms since the epoch); absent: never. */
  readonly expiresAt?: number;
}

/** A change to a key: only the fields given change; `expiresAt: null` removes the expiry. */
export interface ApiKeyPatch {
  readonly owner?: string;
  readonly models?: readonly string[];
  readonly limits?: KeyLimits;
  readonly expiresAt?: number | null;
}

/** Whether a model name or alias is in the catalog now. */
export type KnownModel = (name: string) => boolean;

export const API_KEY_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;
const MODEL_RE = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const MAX_MODELS = 100;
const LIMIT_FIELDS = ['requestsPerMinute', 'tokensPerMinute', 'concurrentRequests', 'tokensPerDay'] as const;
const SPEC_FIELDS = new Set(['name', 'owner', 'models', 'limits', 'expiresAt']);

/** Validates a new key's body: every problem with its path, or the spec. */
export function validateApiKeySpec(raw: unknown, known: KnownModel, now: number): { spec?: ApiKeySpec; problems: Problem[] } {
  const problems: Problem[] = [];
  if (!isObject(raw)) return { problems: [{ path: '', message: 'expected an object { name, owner, models, limits?, expiresAt? }' }] };
  unknownFields(raw, SPEC_FIELDS, problems);
  const name = raw.name;
  if (typeof name !== 'string' || !API_KEY_NAME_RE.test(name)) problems.push({ path: 'name', message: 'required: 1-64 of A-Z a-z 0-9 _ . : -, starting with a letter or digit' });
  const owner = parseOwner(raw.owner, problems, true);
  const models = parseModels(raw.models, known, problems, true);
  const limits = raw.limits === undefined ? {} : parseLimits(raw.limits, problems);
  const expiresAt = raw.expiresAt === undefined ? undefined : parseExpiry(raw.expiresAt, now, problems);
  if (problems.length > 0) return { problems };
  return { spec: { name: name as string, owner: owner as string, models: models as string[], limits: limits as KeyLimits, ...(expiresAt !== undefined && expiresAt !== null && { expiresAt }) }, problems };
}

/** Validates a change to a key: at least one field, each checked as on creation; `name` cannot change. */
export function validateApiKeyPatch(raw: unknown, known: KnownModel, now: number): { patch?: ApiKeyPatch; problems: Problem[] } {
  const problems: Problem[] = [];
  if (!isObject(raw)) return { problems: [{ path: '', message: 'expected an object with owner, models, limits or expiresAt' }] };
  if ('name' in raw) problems.push({ path: 'name', message: 'a key cannot be renamed: create a new one and revoke this one' });
  unknownFields(raw, SPEC_FIELDS, problems);
  if (Object.keys(raw).length === 0) problems.push({ path: '', message: 'nothing to change: give owner, models, limits or expiresAt' });
  const patch: { owner?: string; models?: string[]; limits?: KeyLimits; expiresAt?: number | null } = {};
  if (raw.owner !== undefined) patch.owner = parseOwner(raw.owner, problems, true);
  if (raw.models !== undefined) patch.models = parseModels(raw.models, known, problems, true);
  if (raw.limits !== undefined) patch.limits = parseLimits(raw.limits, problems);
  if (raw.expiresAt !== undefined) patch.expiresAt = parseExpiry(raw.expiresAt, now, problems);
  return problems.length > 0 ? { problems } : { patch, problems };
}

/** Whether a key whose list is `models` may use `model` (a name or alias the request named). */
export function keyAllowsModel(models: readonly string[], model: string): boolean {
  return models.some((m) => m === '*' || m === model || (m.endsWith('*') && model.startsWith(m.slice(0, -1))));
}

function parseOwner(raw: unknown, problems: Problem[], required: boolean): string | undefined {
  if (raw === undefined && !required) return undefined;
  if (typeof raw !== 'string' || raw.trim() === '' || raw.length > 128 || !/^[\x20-\x7e]+$/.test(raw)) {
    problems.push({ path: 'owner', message: 'required: 1-128 printable ASCII characters (the owner or team)' });
    return undefined;
  }
  return raw;
}

function parseModels(raw: unknown, known: KnownModel, problems: Problem[], required: boolean): string[] | undefined {
  if (raw === undefined && !required) return undefined;
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_MODELS) {
    problems.push({ path: 'models', message: `required: a list of 1 to ${MAX_MODELS} model names or aliases ("*" for every model)` });
    return undefined;
  }
  const seen = new Set<string>();
  raw.forEach((m: unknown, i: number) => {
    const at = `models[${i}]`;
    if (typeof m !== 'string') return problems.push({ path: at, message: 'expected a model name, an alias, "*" or "prefix*"' });
    if (seen.has(m)) return problems.push({ path: at, message: `'${m}' is listed twice` });
    seen.add(m);
    if (m === '*') return;
    const pattern = m.endsWith('*');
    const base = pattern ? m.slice(0, -1) : m;
    if (!MODEL_RE.test(base)) return problems.push({ path: at, message: 'expected a model name, an alias, "*" or "prefix*"' });
    if (!pattern && !known(m)) problems.push({ path: at, message: `no model or alias '${m}' in the catalog` });
    return undefined;
  });
  return raw as string[];
}

/** A key's limits as written (each a whole number 1..MAX_KEY_LIMIT, unknown names refused); problems name `<path>.<field>`. */
export function parseKeyLimits(raw: unknown, problems: Problem[], path = 'limits'): KeyLimits | undefined {
  return parseLimits(raw, problems, path);
}

function parseLimits(raw: unknown, problems: Problem[], path = 'limits'): KeyLimits | undefined {
  if (!isObject(raw)) {
    problems.push({ path, message: `expected an object with any of ${LIMIT_FIELDS.join(', ')}` });
    return undefined;
  }
  unknownFields(raw, new Set(LIMIT_FIELDS), problems, `${path}.`);
  const limits: Record<string, number> = {};
  for (const field of LIMIT_FIELDS) {
    const v = raw[field];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_KEY_LIMIT) {
      problems.push({ path: `${path}.${field}`, message: `expected a whole number from 1 to ${MAX_KEY_LIMIT} (leave it out for no limit)` });
    } else limits[field] = v;
  }
  return limits;
}

function parseExpiry(raw: unknown, now: number, problems: Problem[]): number | null | undefined {
  if (raw === null) return null;
  const ms = typeof raw === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(ms)) {
    problems.push({ path: 'expiresAt', message: 'expected an RFC 3339 time with its zone, e.g. 2027-01-31T00:00:00Z (or null for none)' });
    return undefined;
  }
  if (ms <= now) {
    problems.push({ path: 'expiresAt', message: `${raw} is not in the future` });
    return undefined;
  }
  return ms;
}

function unknownFields(raw: Record<string, unknown>, allowed: ReadonlySet<string>, problems: Problem[], prefix = ''): void {
  for (const k of Object.keys(raw)) if (!allowed.has(k)) problems.push({ path: `${prefix}${k}`, message: 'unknown field' });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
