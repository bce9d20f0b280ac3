import { readFileSync } from 'node:fs';
import { keyAllowsModel, parseKeyLimits } from '@llmgw/catalog';
import { bearerSecret, secretHash } from '@llmgw/observability';
import { systemClock, type Clock, type KeyLimits, type ManagedKey, type Problem } from '@llmgw/domain';
import { parse as parseYaml } from 'yaml';

/** One accepted API key and the name logs and metrics use for it (never the key itself). */
export interface ApiKeyEntry {
  readonly name: string;
  readonly key: string;
  /** Models it may use (names, aliases, `prefix*`, `*`); absent: every model. */
  readonly models?: readonly string[];
  /** Its limits; absent: none. */
  readonly limits?: KeyLimits;
}

// The one secret digest and Bearer parse of llmgw's credentials (libs/observability).
const sha256 = secretHash;

/** What the router knows of an accepted key: never its secret. */
export interface RouterKey {
  /** The name logs, metrics, limits and usage use for it. */
  readonly name: string;
  /** Model names, aliases or `prefix*` patterns it may use (`*`: all); absent: every model (static keys). */
  readonly models?: readonly string[];
  readonly limits: KeyLimits;
  /** When it stops being accepted (ms since the epoch). */
  readonly expiresAt?: number;
}

/** The outcome of checking an Authorization header. */
export type KeyCheck = { readonly ok: true; readonly key: RouterKey } | { readonly ok: false; readonly reason: 'missing' | 'unknown' | 'expired' };

/**
 * Checks `Authorization: Bearer <key>` against the accepted keys: those of the static keys file
 * and those the controller publishes (replaced whole on each snapshot, so a revoked key is
 * refused as soon as the snapshot without it arrives). Keys are held only as SHA-256 digests
 * and looked up by digest, so the comparison does not leak a key's prefix through timing and a
 * heap dump holds no key. Once the controller manages keys, the router checks keys even when
 * none is left: revoking the last key never opens the router.
 */
export class ApiKeyAuthenticator {
  private readonly fromFile = new Map<string, RouterKey>();
  private managed = new Map<string, RouterKey>();
  private managing = false;

  constructor(
    entries: readonly ApiKeyEntry[],
    private readonly clock: Clock = systemClock,
  ) {
    for (const e of entries) this.fromFile.set(sha256(e.key), { name: e.name, limits: e.limits ?? {}, ...(e.models !== undefined && { models: e.models }) });
  }

  get size(): number {
    return this.fromFile.size + this.managed.size;
  }

  /** True when requests need a key: a keys file is configured, or the controller manages keys. */
  get enforcing(): boolean {
    return this.fromFile.size > 0 || this.managing;
  }

  /** Takes the controller's keys (all of them: any key not listed is no longer accepted). */
  replaceManaged(keys: readonly ManagedKey[]): void {
    const next = new Map<string, RouterKey>();
    for (const { secretHash, ...key } of keys) next.set(secretHash, key);
    this.managed = next;
    this.managing = true;
  }

  /** The key presented in an Authorization header value, or why there is none. */
  check(authorization: string | undefined): KeyCheck {
    if (authorization === undefined) return { ok: false, reason: 'missing' };
    const secret = bearerSecret(authorization);
    if (secret === undefined) return { ok: false, reason: 'missing' };
    const digest = sha256(secret);
    const key = this.managed.get(digest) ?? this.fromFile.get(digest);
    if (key === undefined) return { ok: false, reason: 'unknown' };
    if (key.expiresAt !== undefined && key.expiresAt <= this.clock.now()) return { ok: false, reason: 'expired' };
    return { ok: true, key };
  }

  /** The name of the key presented in an Authorization header value, or undefined when it is missing, unknown or expired. */
  authenticate(authorization: string | undefined): string | undefined {
    const c = this.check(authorization);
    return c.ok ? c.key.name : undefined;
  }
}

/** Whether `key` may use the model a request named (`requested`, a name or alias) that resolved to `model`. */
export function keyAllows(key: RouterKey, requested: string, model: string): boolean {
  return key.models === undefined || keyAllowsModel(key.models, requested) || keyAllowsModel(key.models, model);
}

/**
 * Reads the API keys file (YAML or JSON): `keys:` a list of `{ name, key }` (or a bare list of
 * them). Every problem is reported at once, each with its path; names and keys must be unique,
 * keys at least 16 characters with no whitespace.
 */
export function loadApiKeysFile(path: string): ApiKeyEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`API keys file ${path}: cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseApiKeys(text, path);
}

/** Parses the API keys document; `source` names it in errors. */
export function parseApiKeys(text: string, source: string): ApiKeyEntry[] {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new Error(`API keys file ${source}: not valid YAML/JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  const list = Array.isArray(doc) ? doc : doc !== null && typeof doc === 'object' ? (doc as { keys?: unknown }).keys : undefined;
  const base = Array.isArray(doc) ? '' : 'keys';
  const problems: string[] = [];
  const entries: ApiKeyEntry[] = [];
  if (!Array.isArray(list)) {
    problems.push(`${base || '(document)'}: expected a list of { name, key }`);
  } else {
    const names = new Set<string>();
    const keys = new Set<string>();
    list.forEach((item: unknown, i: number) => {
      const at = `${base}[${i}]`;
      if (item === null || typeof item !== 'object' || Array.isArray(item)) {
        problems.push(`${at}: expected { name, key }`);
        return;
      }
      const { name, key, models, limits } = item as { name?: unknown; key?: unknown; models?: unknown; limits?: unknown };
      const extra = Object.keys(item).filter((k) => !['name', 'key', 'models', 'limits'].includes(k));
      if (extra.length > 0) problems.push(`${at}: unknown field(s) ${extra.join(', ')}`);
      if (typeof name !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(name)) problems.push(`${at}.name: expected 1-64 of A-Z a-z 0-9 _ . : -`);
      else if (names.has(name)) problems.push(`${at}.name: '${name}' is used twice`);
      if (typeof key !== 'string' || key.length < 16 || /\s/.test(key)) problems.push(`${at}.key: expected at least 16 characters without whitespace`);
      else if (keys.has(key)) problems.push(`${at}.key: the same key is listed twice`);
      const limitProblems: Problem[] = [];
      const parsedLimits = limits === undefined ? undefined : parseKeyLimits(limits, limitProblems, `${at}.limits`);
      for (const p of limitProblems) problems.push(`${p.path}: ${p.message}`);
      const modelsOk = models === undefined || (Array.isArray(models) && models.length > 0 && models.every((m) => typeof m === 'string' && m !== ''));
      if (!modelsOk) problems.push(`${at}.models: expected a list of model names, aliases, "prefix*" or "*"`);
      if (typeof name === 'string' && typeof key === 'string') {
        names.add(name);
        keys.add(key);
        entries.push({ name, key, ...(modelsOk && models !== undefined && { models: models as string[] }), ...(parsedLimits !== undefined && { limits: parsedLimits }) });
      }
    });
    if (list.length === 0) problems.push(`${base || '(document)'}: no keys listed (leave the setting unset to run without authentication)`);
  }
  if (problems.length > 0) throw new Error(`API keys file ${source}: ${problems.length} problem(s):\n  ${problems.join('\n  ')}`);
  return entries;
}
