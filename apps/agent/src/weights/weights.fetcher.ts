import { existsSync } from 'node:fs';
import { lstat, mkdir, readdir, rename, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { cacheName as cacheNameOf, isCacheName } from '@llmgw/catalog';
import { errorMessage, type AgentLogger } from '../runtime/agent.logger';
import { syncDir } from '../state/atomic-file';
import type { WeightsProvider } from '../supervision/replica.supervisor';
import { downloadFile, DownloadError, type DownloadPolicy } from './file.downloader';
import type { HttpClient } from './http.client';
import type { SourcePolicy } from './source.policy';
import { hfFileUrl, hfRepoInfoUrl, type WeightsSource } from './weights-source.parser';

/** Where and how weights are fetched. */
export interface FetcherSettings extends DownloadPolicy {
  /** Absolute path of the weights cache directory. */
  readonly cacheDir: string;
  /** Hugging Face endpoint `hf://` sources resolve against, e.g. `https://huggingface.co`. */
  readonly hfEndpoint: string;
  /** Sent as `Authorization: Bearer` to the Hugging Face endpoint only. */
  readonly hfToken?: string;
  /** Least time between two progress reports of one fetch, ms. */
  readonly progressIntervalMs: number;
}

/** What FetchWeights asks for. Sizes in bytes. */
export interface FetchRequest {
  readonly source: string;
  readonly cacheName: string;
  readonly sizeBytes?: number;
  readonly sha256?: string;
}

export interface FetchOutcome {
  /** Where the weights are now. */
  readonly path: string;
  readonly bytes: number;
  /** True when nothing had to be downloaded. */
  readonly alreadyPresent: boolean;
  readonly message: string;
}

type Progress = (p: { readonly fetchedBytes: number; readonly totalBytes?: number }) => void;

/** Suffix of the file (or directory) a download accumulates in before its atomic rename. */
export const PARTIAL_SUFFIX = '.partial';

/**
 * Brings weights into the cache directory under their cache name: http(s) and `hf://` files and
 * whole `hf://` repositories (a directory). Each lands in `<name>.partial` first and is renamed
 * when complete and checked, so a name in the cache is always whole. One download per cache name
 * at a time: a second request for the same name joins the first. `file://` sources are used
 * where they are and never copied.
 */
export class WeightsFetcher implements WeightsProvider {
  private readonly inflight = new Map<string, { promise: Promise<FetchOutcome>; listeners: Set<Progress> }>();

  constructor(
    private readonly http: HttpClient,
    private readonly settings: FetcherSettings,
    private readonly logger: AgentLogger,
    /** This node's source policy: checked before anything is fetched (and by `http` on every connection). */
    private readonly policy: SourcePolicy,
  ) {}

  /** Cache entries being written now (names and their `.partial` forms): never collected. */
  activeNames(): Set<string> {
    const names = new Set<string>();
    for (const name of this.inflight.keys()) {
      names.add(name);
      names.add(`${name}${PARTIAL_SUFFIX}`);
    }
    return names;
  }

  /** WeightsProvider: fetches a replica's weights when absent (no size or checksum known here). */
  async ensure(request: { readonly source: string; readonly cacheName: string }, onProgress: Progress): Promise<void> {
    await this.fetch({ source: request.source, cacheName: request.cacheName }, onProgress);
  }

  /**
   * Handles FetchWeights. Rejects with a message naming the problem: a source this node's policy
   * refuses (nothing is fetched), a cache name that is not the source's, an unreachable or
   * missing source, a size or checksum mismatch.
   */
  fetch(request: FetchRequest, onProgress?: Progress): Promise<FetchOutcome> {
    const running = this.inflight.get(request.cacheName);
    if (running) {
      if (onProgress) running.listeners.add(onProgress);
      return running.promise;
    }
    const listeners = new Set<Progress>(onProgress ? [onProgress] : []);
    let last = 0;
    const report = (fetchedBytes: number, totalBytes: number | undefined, force = false): void => {
      const now = performance.now();
      if (!force && now - last < this.settings.progressIntervalMs) return;
      last = now;
      for (const l of listeners) l({ fetchedBytes, ...(totalBytes !== undefined && { totalBytes }) });
    };
    const promise = this.run(request, report).finally(() => this.inflight.delete(request.cacheName));
    this.inflight.set(request.cacheName, { promise, listeners });
    return promise;
  }

  private async run(request: FetchRequest, report: (fetched: number, total: number | undefined, force?: boolean) => void): Promise<FetchOutcome> {
    const source = await this.policy.admitSource(request.source).catch((error: unknown) => {
      this.logger.warn({ source: request.source, err: errorMessage(error) }, 'weights source refused');
      throw error;
    });
    if (source.kind === 'file') {
      const st = await stat(source.path).catch(() => undefined);
      if (!st) throw new Error(`${request.source} is used in place and does not exist on this node`);
      return { path: source.path, bytes: st.size, alreadyPresent: true, message: `${source.path} is used in place; nothing fetched` };
    }
    const expected = cacheNameOf(request.source);
    if (!isCacheName(request.cacheName) || request.cacheName !== expected) {
      throw new Error(`cache name ${JSON.stringify(request.cacheName)} is not the cache name of ${request.source} (expected ${expected})`);
    }
    const target = join(this.settings.cacheDir, request.cacheName);
    const present = await lstat(target).catch(() => undefined);
    if (present) {
      if (present.isSymbolicLink()) throw new Error(`${target} is a symbolic link, not weights this agent fetched`);
      const bytes = present.isDirectory() ? await directorySize(target) : present.size;
      if (present.isFile() && request.sizeBytes !== undefined && bytes !== request.sizeBytes) {
        throw new Error(`${target} is present with ${bytes} bytes, expected ${request.sizeBytes}; collect it to fetch again`);
      }
      return { path: target, bytes, alreadyPresent: true, message: `${request.cacheName} is already in the cache (${bytes} bytes)` };
    }
    await mkdir(this.settings.cacheDir, { recursive: true });
    const started = performance.now();
    this.logger.info({ source: request.source, cacheName: request.cacheName }, 'fetching weights');
    try {
      const result = source.kind === 'hf-repo' ? await this.fetchRepo(source, request, target, report) : await this.fetchFile(source, request, target, report);
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const resumed = result.resumedFrom > 0 ? `, resumed from byte ${result.resumedFrom}` : '';
      this.logger.info({ cacheName: request.cacheName, bytes: result.bytes, seconds }, 'weights fetched');
      return { path: target, bytes: result.bytes, alreadyPresent: false, message: `fetched ${request.cacheName}: ${result.bytes} bytes in ${seconds} s${resumed}` };
    } catch (error) {
      this.logger.warn({ cacheName: request.cacheName, err: errorMessage(error) }, 'weights fetch failed');
      throw error;
    }
  }

  private async fetchFile(
    source: Extract<WeightsSource, { kind: 'http' | 'hf-file' }>,
    request: FetchRequest,
    target: string,
    report: (fetched: number, total: number | undefined, force?: boolean) => void,
  ): Promise<{ bytes: number; resumedFrom: number }> {
    const url = source.kind === 'http' ? source.url : hfFileUrl(this.settings.hfEndpoint, source.repo, source.revision, source.file);
    let lastTotal: number | undefined;
    const result = await downloadFile(
      this.http,
      {
        url,
        target,
        partial: `${target}${PARTIAL_SUFFIX}`,
        headers: source.kind === 'http' ? {} : this.hfHeaders(),
        ...(request.sizeBytes !== undefined && { expectedSize: request.sizeBytes }),
        ...(request.sha256 !== undefined && request.sha256 !== '' && { sha256: request.sha256 }),
        onProgress: (fetched, total) => {
          lastTotal = total;
          report(fetched, total);
        },
      },
      this.settings,
    );
    report(result.bytes, lastTotal ?? result.bytes, true);
    return result;
  }

  /** Every file of the repository into `<name>.partial/`, then one rename to `<name>`. */
  private async fetchRepo(
    source: Extract<WeightsSource, { kind: 'hf-repo' }>,
    request: FetchRequest,
    target: string,
    report: (fetched: number, total: number | undefined, force?: boolean) => void,
  ): Promise<{ bytes: number; resumedFrom: number }> {
    const files = await this.listRepo(source);
    const partialDir = `${target}${PARTIAL_SUFFIX}`;
    await mkdir(partialDir, { recursive: true });
    const knownTotal = files.every((f) => f.size !== undefined) ? files.reduce((sum, f) => sum + (f.size as number), 0) : undefined;
    if (request.sizeBytes !== undefined && knownTotal !== undefined && knownTotal !== request.sizeBytes) {
      throw new DownloadError(`${request.source} lists ${knownTotal} bytes, expected ${request.sizeBytes}`, false);
    }
    let done = 0;
    let resumedFrom = 0;
    for (const file of files) {
      const dest = join(partialDir, file.name);
      await mkdir(dirname(dest), { recursive: true });
      if (existsSync(dest)) {
        // Completed by an earlier, interrupted fetch of this repository.
        done += (await stat(dest)).size;
        continue;
      }
      const result = await downloadFile(
        this.http,
        {
          url: hfFileUrl(this.settings.hfEndpoint, source.repo, source.revision, file.name),
          target: dest,
          partial: `${dest}${PARTIAL_SUFFIX}`,
          headers: this.hfHeaders(),
          ...(file.size !== undefined && { expectedSize: file.size }),
          onProgress: (fetched) => report(done + fetched, knownTotal),
        },
        this.settings,
      );
      resumedFrom += result.resumedFrom;
      done += result.bytes;
    }
    if (request.sizeBytes !== undefined && done !== request.sizeBytes) {
      throw new DownloadError(`${request.source}: got ${done} bytes in ${files.length} files, expected ${request.sizeBytes}`, false);
    }
    await rename(partialDir, target);
    syncDir(this.settings.cacheDir);
    report(done, done, true);
    return { bytes: done, resumedFrom };
  }

  /** The repository's files (`siblings[].rfilename`, with `size` when the endpoint gives it), each path checked. */
  private async listRepo(source: Extract<WeightsSource, { kind: 'hf-repo' }>): Promise<{ name: string; size?: number }[]> {
    const url = hfRepoInfoUrl(this.settings.hfEndpoint, source.repo, source.revision);
    const res = await this.http.get(url, { headers: this.hfHeaders(), signal: AbortSignal.timeout(this.settings.stallTimeoutMs) });
    let text = '';
    for await (const chunk of res.body) text += Buffer.from(chunk).toString('utf8');
    if (res.status !== 200) throw new DownloadError(`GET ${url} answered HTTP ${res.status}`, res.status >= 500);
    let info: { siblings?: { rfilename?: unknown; size?: unknown }[] };
    try {
      info = JSON.parse(text);
    } catch {
      throw new DownloadError(`${url} did not answer JSON`, false);
    }
    if (!Array.isArray(info.siblings) || info.siblings.length === 0) throw new DownloadError(`${url} lists no files (siblings)`, false);
    return info.siblings.map((s, i) => {
      const name = s?.rfilename;
      if (typeof name !== 'string' || !isSafeRelativePath(name)) {
        throw new DownloadError(`${url}: siblings[${i}].rfilename ${JSON.stringify(name)} is not a safe relative path`, false);
      }
      const size = typeof s.size === 'number' && Number.isSafeInteger(s.size) && s.size >= 0 ? s.size : undefined;
      return { name, ...(size !== undefined && { size }) };
    });
  }

  private hfHeaders(): Record<string, string> {
    return this.settings.hfToken ? { Authorization: `Bearer ${this.settings.hfToken}` } : {};
  }
}

/** A repository file path that stays inside the directory it is joined to. */
function isSafeRelativePath(name: string): boolean {
  if (name === '' || name.length > 1024 || name.startsWith('/') || /[\0\\]/.test(name)) return false;
  return name.split('/').every((s) => s !== '' && s !== '.' && s !== '..' && !s.endsWith(PARTIAL_SUFFIX));
}

async function directorySize(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) total += await directorySize(p);
    else if (entry.isFile()) total += (await stat(p)).size;
  }
  return total;
}
