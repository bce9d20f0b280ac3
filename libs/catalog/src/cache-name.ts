import { createHash } from 'node:crypto';

/** Every cache name starts with this; nothing else in a weights cache is llmgw's to delete. */
export const CACHE_NAME_PREFIX = 'llmgw-';
const HASH_HEX = 16;
const MAX_BASENAME = 64;
/** Longest cache name `cacheName` can produce: prefix, hash, dash, basename. */
export const CACHE_NAME_MAX_LENGTH = CACHE_NAME_PREFIX.length + HASH_HEX + 1 + MAX_BASENAME;

const CACHE_NAME_RE = /^llmgw-[0-9a-f]{16}-[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$/;

/**
 * The name a downloaded weights source gets in a node's cache:
 * `llmgw-<first 16 hex of sha256(source)>-<safe basename>`. Deterministic (the same source always
 * gives the same name, so the wanted set is computed from the catalog exactly) and always accepted
 * by `isCacheName`. `file://` sources are used in place and have no cache name: `undefined`.
 */
export function cacheName(source: string): string | undefined {
  if (source.startsWith('file://')) return undefined;
  const hash = createHash('sha256').update(source, 'utf8').digest('hex').slice(0, HASH_HEX);
  return `${CACHE_NAME_PREFIX}${hash}-${safeBasename(source)}`;
}

/**
 * True only for names `cacheName` can produce: the exact prefix, 16 lowercase hex digits, a
 * basename of `[A-Za-z0-9._-]` not starting with a dot, no `..`, no `/`, bounded length. The agent
 * refuses to delete anything else.
 */
export function isCacheName(name: unknown): boolean {
  return (
    typeof name === 'string' &&
    name.length <= CACHE_NAME_MAX_LENGTH &&
    CACHE_NAME_RE.test(name) &&
    !name.includes('..')
  );
}

/** The human part of a cache name: the file (or repository) a source names, made path-safe. */
function safeBasename(source: string): string {
  let base = lastSegment(source);
  base = base.replace(/[^A-Za-z0-9._-]/g, '_').replace(/\.{2,}/g, '.');
  // Keep the end: the extension says more about a file than a long prefix.
  if (base.length > MAX_BASENAME) base = base.slice(base.length - MAX_BASENAME);
  base = base.replace(/^\.+/, '');
  return base === '' ? 'weights' : base;
}

function lastSegment(source: string): string {
  let rest = source.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  if (source.startsWith('hf://')) rest = rest.replace(/@[^@]*$/, '');
  else rest = rest.replace(/[?#].*$/, '');
  const segments = rest.split('/').filter((s) => s !== '');
  return segments.length > 1 ? segments[segments.length - 1] : '';
}
