import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/** One accepted API key and the name logs and metrics use for it (never the key itself). */
export interface ApiKeyEntry {
  readonly name: string;
  readonly key: string;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * Checks `Authorization: Bearer <key>` against the configured keys. Keys are held only as
 * SHA-256 digests and looked up by digest, so the comparison does not leak a key's prefix
 * through timing and a heap dump holds no key.
 */
export class ApiKeyAuthenticator {
  private readonly byDigest = new Map<string, string>();

  constructor(entries: readonly ApiKeyEntry[]) {
    for (const e of entries) this.byDigest.set(sha256(e.key), e.name);
  }

  get size(): number {
    return this.byDigest.size;
  }

  /** The name of the key presented in an Authorization header value, or undefined when it is missing or unknown. */
  authenticate(authorization: string | undefined): string | undefined {
    if (authorization === undefined) return undefined;
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
    if (m === null) return undefined;
    return this.byDigest.get(sha256(m[1]));
  }
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
      const { name, key } = item as { name?: unknown; key?: unknown };
      const extra = Object.keys(item).filter((k) => k !== 'name' && k !== 'key');
      if (extra.length > 0) problems.push(`${at}: unknown field(s) ${extra.join(', ')}`);
      if (typeof name !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(name)) problems.push(`${at}.name: expected 1-64 of A-Z a-z 0-9 _ . : -`);
      else if (names.has(name)) problems.push(`${at}.name: '${name}' is used twice`);
      if (typeof key !== 'string' || key.length < 16 || /\s/.test(key)) problems.push(`${at}.key: expected at least 16 characters without whitespace`);
      else if (keys.has(key)) problems.push(`${at}.key: the same key is listed twice`);
      if (typeof name === 'string' && typeof key === 'string') {
        names.add(name);
        keys.add(key);
        entries.push({ name, key });
      }
    });
    if (list.length === 0) problems.push(`${base || '(document)'}: no keys listed (leave the setting unset to run without authentication)`);
  }
  if (problems.length > 0) throw new Error(`API keys file ${source}: ${problems.length} problem(s):\n  ${problems.join('\n  ')}`);
  return entries;
}
