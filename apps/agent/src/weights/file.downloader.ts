import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { syncDir } from '../state/atomic-file';
import { AddressRefusedError, type HttpClient } from './http.client';

/** One file to download. Sizes in bytes. */
export interface DownloadRequest {
  readonly url: string;
  /** Final path; written only by the atomic rename of `partial`. */
  readonly target: string;
  /** Where bytes accumulate; kept across interruptions so the next try resumes. */
  readonly partial: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** The file must have exactly this many bytes. */
  readonly expectedSize?: number;
  /** Hex sha256 the complete file must have (case-insensitive). */
  readonly sha256?: string;
  /** Bytes in `partial` so far and the total when known; called per chunk. */
  readonly onProgress?: (fetchedBytes: number, totalBytes: number | undefined) => void;
  readonly signal?: AbortSignal;
}

/** Retry behaviour. Times in milliseconds. */
export interface DownloadPolicy {
  /** Requests tried in all before giving up (each resumes where the last stopped). */
  readonly attempts: number;
  /** Pause before the second try; doubles after each failure. */
  readonly retryDelayMs: number;
  /** A response that delivers no byte for this long is abandoned (and resumed). */
  readonly stallTimeoutMs: number;
}

export interface DownloadResult {
  readonly bytes: number;
  /** Bytes already in the partial file when this call started (0 = fresh download). */
  readonly resumedFrom: number;
  /** HTTP requests made. */
  readonly requests: number;
}

/** A failure that trying again cannot fix (a 404, a size or checksum mismatch). */
export class DownloadError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'DownloadError';
  }
}

/**
 * Downloads `url` into `partial`, resuming an earlier partial file with an HTTP Range request
 * (a server that ignores Range restarts it from 0), retries interrupted transfers, then checks
 * the size (the server's declared length and `expectedSize`) and `sha256`, and renames `partial`
 * to `target` atomically. A file that fails a check is deleted, never renamed: it cannot become
 * correct by resuming.
 */
export async function downloadFile(http: HttpClient, req: DownloadRequest, policy: DownloadPolicy): Promise<DownloadResult> {
  const resumedFrom = await sizeOf(req.partial);
  let requests = 0;
  let lastError: Error | undefined;
  let done = false;
  for (let attempt = 1; attempt <= policy.attempts && !done; attempt++) {
    if (attempt > 1) await delay(policy.retryDelayMs * 2 ** (attempt - 2), req.signal);
    req.signal?.throwIfAborted();
    try {
      requests++;
      done = await transfer(http, req, policy);
      lastError = undefined;
    } catch (error) {
      if ((error instanceof DownloadError && !error.retryable) || error instanceof AddressRefusedError) throw error;
      if (req.signal?.aborted) throw error;
      lastError = error instanceof Error ? error : new Error(String(error));
    }
  }
  if (!done) {
    throw new DownloadError(`download of ${req.url} failed after ${requests} request(s): ${lastError?.message ?? 'incomplete'}`, true);
  }
  const bytes = await verify(req);
  const fh = await open(req.partial, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(req.partial, req.target);
  syncDir(dirname(req.target));
  return { bytes, resumedFrom, requests };
}

/** One request: true when `partial` now holds the complete file. */
async function transfer(http: HttpClient, req: DownloadRequest, policy: DownloadPolicy): Promise<boolean> {
  let have = await sizeOf(req.partial);
  if (req.expectedSize !== undefined && have > req.expectedSize) {
    await rm(req.partial, { force: true }); // longer than the file can be: not a prefix of it
    have = 0;
  }
  if (req.expectedSize !== undefined && have === req.expectedSize) return true;

  const stall = new AbortController();
  let stallTimer: NodeJS.Timeout | undefined;
  const armStall = (): void => {
    clearTimeout(stallTimer);
    stallTimer = setTimeout(() => stall.abort(new Error(`no data for ${policy.stallTimeoutMs} ms`)), policy.stallTimeoutMs);
  };
  const signal = req.signal ? AbortSignal.any([req.signal, stall.signal]) : stall.signal;
  const headers: Record<string, string> = { ...(req.headers ?? {}) };
  if (have > 0) headers.Range = `bytes=${have}-`;
  armStall();
  try {
    const res = await http.get(req.url, { headers, signal });
    let total: number | undefined;
    let append: boolean;
    if (res.status === 206 && have > 0) {
      const range = parseContentRange(res.header('content-range'));
      if (!range || range.start !== have) {
        await res.cancel();
        await rm(req.partial, { force: true });
        throw new DownloadError(`server answered range ${res.header('content-range') ?? '(none)'} for bytes=${have}-; starting over`, true);
      }
      total = range.total;
      append = true;
    } else if (res.status === 416 && have > 0) {
      // Nothing left to send from `have`: the partial file may already be complete.
      await res.cancel();
      const range = parseContentRange(res.header('content-range'));
      if (range?.total === have) return true;
      await rm(req.partial, { force: true });
      throw new DownloadError(`server refused bytes=${have}- (HTTP 416); starting over`, true);
    } else if (res.status === 200) {
      const length = res.header('content-length');
      total = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
      append = false; // a server that ignores Range sends everything: start over
    } else {
      await res.cancel();
      const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
      throw new DownloadError(`GET ${req.url} answered HTTP ${res.status}`, retryable);
    }
    if (req.expectedSize !== undefined && total !== undefined && total !== req.expectedSize) {
      await res.cancel();
      await rm(req.partial, { force: true });
      throw new DownloadError(`${req.url} has ${total} bytes, expected ${req.expectedSize}`, false);
    }
    const fh = await open(req.partial, append ? 'a' : 'w', 0o644);
    let written = append ? have : 0;
    try {
      for await (const chunk of res.body) {
        armStall();
        await fh.write(chunk);
        written += chunk.byteLength;
        req.onProgress?.(written, total);
      }
    } finally {
      await fh.close();
    }
    if (total !== undefined && written !== total) throw new DownloadError(`transfer ended at ${written} of ${total} bytes`, true);
    return true;
  } catch (error) {
    if (stall.signal.aborted && !req.signal?.aborted) throw new DownloadError(`transfer stalled: ${(stall.signal.reason as Error).message}`, true);
    throw error;
  } finally {
    clearTimeout(stallTimer);
  }
}

/** Size and checksum of the complete partial file; deletes it when either is wrong. */
async function verify(req: DownloadRequest): Promise<number> {
  const bytes = await sizeOf(req.partial);
  if (req.expectedSize !== undefined && bytes !== req.expectedSize) {
    await rm(req.partial, { force: true });
    throw new DownloadError(`${req.url}: got ${bytes} bytes, expected ${req.expectedSize}`, false);
  }
  if (req.sha256 !== undefined) {
    const actual = await sha256Of(req.partial);
    if (actual !== req.sha256.toLowerCase()) {
      await rm(req.partial, { force: true });
      throw new DownloadError(`${req.url}: sha256 is ${actual}, expected ${req.sha256.toLowerCase()}; the download was deleted`, false);
    }
  }
  return bytes;
}

/** Hex sha256 of a file's content. */
export async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Parses a Content-Range value (`bytes START-END/TOTAL`, or a star for START-END); total undefined when it is a star. */
export function parseContentRange(value: string | undefined): { start?: number; total?: number } | undefined {
  if (value === undefined) return undefined;
  const m = /^bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)$/i.exec(value.trim());
  if (!m) return undefined;
  return {
    ...(m[1] !== undefined && { start: Number(m[1]) }),
    ...(m[3] !== '*' && { total: Number(m[3]) }),
  };
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
