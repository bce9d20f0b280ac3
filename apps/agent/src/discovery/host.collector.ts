import { lstat, readdir, statfs } from 'node:fs/promises';
import { availableParallelism, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { DomainError, ErrorCode, type CacheEntry, type NodeCache } from '@llmgw/domain';

/** CPU and memory of this machine. */
export interface HostFacts {
  /** CPUs this process may run on (affinity-aware). */
  readonly cpuCores: number;
  readonly memoryBytes: number;
}

function isNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException)?.code === 'ENOENT';
}

/** Bytes under `path` (not following links) and the newest mtime in ms; undefined when it vanished. */
async function measure(path: string): Promise<{ sizeBytes: number; modifiedAt: number } | undefined> {
  let sizeBytes = 0;
  let modifiedAt = 0;
  const pending = [path];
  while (pending.length > 0) {
    const p = pending.pop()!;
    let st;
    try {
      st = await lstat(p);
    } catch (error) {
      if (isNotFound(error)) {
        if (p === path) return undefined;
        continue; // removed while we walked (a GC or a finished download renaming its partial file)
      }
      throw error;
    }
    modifiedAt = Math.max(modifiedAt, st.mtimeMs);
    if (st.isDirectory()) {
      try {
        for (const name of await readdir(p)) pending.push(join(p, name));
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    } else {
      sizeBytes += st.size;
    }
  }
  return { sizeBytes, modifiedAt: Math.round(modifiedAt) };
}

/**
 * Host facts from node:os, and the weights cache directory: filesystem total and free bytes
 * (statfs; free = what an unprivileged process may still write) and its top-level entries.
 */
export class HostCollector {
  /** Absolute form of the configured cache directory (relative paths resolve against the working directory). */
  readonly cacheDir: string;

  constructor(cacheDir: string) {
    this.cacheDir = resolve(cacheDir);
  }

  host(): HostFacts {
    return { cpuCores: availableParallelism(), memoryBytes: totalmem() };
  }

  /**
   * Entries are the cache directory's top-level names, sorted; a directory's size is the sum of
   * the files under it and its `modifiedAt` the newest mtime inside it; links are not followed.
   * A cache directory that does not exist yet has no entries, and its space is measured on the
   * nearest existing parent (the filesystem it will be created on).
   */
  async cache(): Promise<NodeCache> {
    const dir = this.cacheDir;
    try {
      let names: string[] = [];
      let measured = dir;
      try {
        names = await readdir(dir);
      } catch (error) {
        if (!isNotFound(error)) throw error;
        while (measured !== dirname(measured)) {
          measured = dirname(measured);
          if (await lstat(measured).then(() => true, () => false)) break;
        }
      }
      const fs = await statfs(measured);
      const entries: CacheEntry[] = [];
      for (const name of names.sort()) {
        const m = await measure(join(dir, name));
        if (m) entries.push({ name, ...m });
      }
      return { dir, totalBytes: fs.blocks * fs.bsize, freeBytes: fs.bavail * fs.bsize, entries };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new DomainError(ErrorCode.Unavailable, `cache directory ${dir} cannot be read: ${reason}`, [{ path: 'cacheDir', message: reason }]);
    }
  }
}
