import { randomBytes } from 'node:crypto';
import { lstat, realpath, rename, rm } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { CACHE_NAME_MAX_LENGTH, isCacheName } from '@llmgw/catalog';
import { errorMessage, type AgentLogger } from '../runtime/agent.logger';
import { syncDir } from '../state/atomic-file';

/** What happened to one path of a CollectWeights command. */
export type CollectOutcome = 'removed' | 'refused' | 'not-found' | 'failed';

export interface CollectedPath {
  /** The path exactly as asked. */
  readonly path: string;
  readonly outcome: CollectOutcome;
  /** Why it was refused or failed; empty when removed. */
  readonly reason: string;
}

export interface WeightsCollectorDeps {
  /** The configured (absolute) cache directory. */
  readonly cacheDir: string;
  /** Weights paths replicas on this node use, each with the replica using it. */
  readonly inUse: () => ReadonlyMap<string, string>;
  /** Cache entry names being written now (downloads and their partial files). */
  readonly active: () => ReadonlySet<string>;
  readonly logger: AgentLogger;
}

/** Longest path text looked at; anything longer is refused before any file system call. */
const MAX_PATH_CHARS = 4096;

type Check = { readonly ok: true; readonly name: string } | { readonly ok: false; readonly reason: string };

/**
 * Removes weights the controller asks this node to give back — but decides itself, path by
 * path, whether it may. It removes only an entry that lies directly inside its own cache
 * directory (the path as given and after resolving links), carries a cache name (so llmgw
 * fetched it: anything else was put there by an operator and is not this system's to delete),
 * is a plain file or directory (not a link), and is not in use by a replica or a download.
 * Everything else is refused with the reason. A controller that is wrong, newer than this agent
 * or tampered with cannot talk it into deleting anything else.
 */
export class WeightsCollector {
  constructor(private readonly deps: WeightsCollectorDeps) {}

  /** One result per path, in the order asked. Never throws for a bad path. */
  async collect(paths: readonly string[]): Promise<CollectedPath[]> {
    const results: CollectedPath[] = [];
    for (const path of paths) {
      const result = await this.collectOne(path);
      const fields = { path: printable(path), outcome: result.outcome, reason: result.reason };
      if (result.outcome === 'removed') this.deps.logger.info(fields, 'weights collected');
      else if (result.outcome === 'refused') this.deps.logger.warn(fields, 'weights collection refused');
      else if (result.outcome === 'failed') this.deps.logger.error(fields, 'weights collection failed');
      results.push(result);
    }
    return results;
  }

  private async collectOne(path: string): Promise<CollectedPath> {
    const refused = (reason: string): CollectedPath => ({ path, outcome: 'refused', reason });
    const configured = this.deps.cacheDir;
    let cacheDir: string;
    try {
      cacheDir = await realpath(configured);
    } catch {
      const check = checkPath(path, [configured]);
      return check.ok ? { path, outcome: 'not-found', reason: `cache directory ${configured} does not exist` } : refused(check.reason);
    }
    // 1. The text alone: form, traversal, directly inside the cache directory, cache name.
    const check = checkPath(path, [configured, cacheDir]);
    if (!check.ok) return refused(check.reason);
    const name = check.name;
    const full = join(cacheDir, name);
    // 2. What is on disk: a plain file or directory, not a link, resolving to itself.
    let st;
    try {
      st = await lstat(full);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { path, outcome: 'not-found', reason: 'nothing there' };
      return { path, outcome: 'failed', reason: `cannot inspect ${full}: ${errorMessage(error)}` };
    }
    if (st.isSymbolicLink()) return refused(`${name} is a symbolic link; links are never followed or removed`);
    if (!st.isFile() && !st.isDirectory()) return refused(`${name} is not a regular file or directory`);
    const resolved = await realpath(full).catch(() => undefined);
    if (resolved !== full) return refused(`${name} resolves to ${resolved ?? 'nothing'}, not to an entry of the cache directory`);
    // 3. Not in use.
    const user = this.userOf(name, [configured, cacheDir]);
    if (user !== undefined) return refused(`${name} is in use by replica ${user}`);
    if (this.deps.active().has(name)) return refused(`${name} is being downloaded`);
    // 4. Remove: first rename it out of the cache name (atomic), so a half-removed directory
    //    never looks like complete weights, then delete (links inside are removed, not followed).
    const doomed = join(cacheDir, `.llmgw-removing-${randomBytes(6).toString('hex')}`);
    try {
      await rename(full, doomed);
      syncDir(cacheDir);
    } catch (error) {
      return { path, outcome: 'failed', reason: `cannot remove ${full}: ${errorMessage(error)}` };
    }
    try {
      await rm(doomed, { recursive: true, force: false });
    } catch (error) {
      return { path, outcome: 'failed', reason: `renamed to ${doomed} but cannot delete it: ${errorMessage(error)}` };
    }
    return { path, outcome: 'removed', reason: '' };
  }

  /** The replica whose weights are this entry or lie inside it, if any. */
  private userOf(name: string, dirs: readonly string[]): string | undefined {
    for (const [weights, replicaId] of this.deps.inUse()) {
      for (const dir of dirs) {
        const entry = join(dir, name);
        if (weights === entry || weights.startsWith(`${entry}/`)) return replicaId;
      }
    }
    return undefined;
  }
}

/**
 * The checks that need no file system: a cache name, or an absolute path whose parent is the
 * cache directory (as configured or resolved) and whose last part is a cache name. Refuses NUL
 * and control characters, overlong text, `.`/`..` and empty segments, relative paths with
 * directories, and names without the cache-name form.
 */
export function checkPath(path: unknown, cacheDirs: readonly string[]): Check {
  const no = (reason: string): Check => ({ ok: false, reason });
  if (typeof path !== 'string' || path === '') return no('empty path');
  if (path.includes('\0')) return no('contains a NUL byte');
  if (/[\x01-\x1f\x7f]/.test(path)) return no('contains control characters');
  if (path.length > MAX_PATH_CHARS) return no(`is ${path.length} characters long; no cache entry path is that long`);
  const segments = path.split('/');
  if (segments.some((s) => s === '..')) return no('traversal: contains a `..` segment');
  let name: string;
  if (path.includes('/')) {
    if (!isAbsolute(path)) return no('a relative path with directories; give a cache name or an absolute path directly inside the cache directory');
    if (segments.slice(1).some((s) => s === '' || s === '.')) return no('not a normalised path (empty or `.` segments)');
    const parent = dirname(path);
    if (!cacheDirs.includes(parent)) return no(`outside the cache directory ${cacheDirs[0]} (or not directly inside it)`);
    name = basename(path);
  } else {
    name = path;
  }
  if (name === '.' || name === '..') return no('names the cache directory or its parent, not an entry');
  if (name.length > CACHE_NAME_MAX_LENGTH) return no(`name is ${name.length} characters; a cache name has at most ${CACHE_NAME_MAX_LENGTH}`);
  if (!isCacheName(name)) return no(`${name} is not a cache name: llmgw did not fetch it, so it is not llmgw's to remove`);
  return { ok: true, name };
}

/** The path for a log line: control characters escaped, long text cut. */
function printable(path: string): string {
  const safe = JSON.stringify(path).slice(1, -1);
  return safe.length > 300 ? `${safe.slice(0, 300)}…` : safe;
}
