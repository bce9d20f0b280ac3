// The weights fetcher against a real local HTTP server and a real cache directory: downloads
// resume after interruption with Range, sizes and checksums are enforced, hf:// resolves against
// a configurable endpoint (single files and whole repositories), file:// is never copied.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cacheName } from '@llmgw/catalog';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SILENT_LOGGER } from '../runtime/agent.logger';
import { parseIpNetwork, type IpNetwork } from '@llmgw/catalog';
import { PolicyHttpClient } from './http.client';
import { SourcePolicy } from './source.policy';
import { WeightsFetcher, type FetcherSettings } from './weights.fetcher';

interface Seen {
  method: string;
  url: string;
  range?: string;
  authorization?: string;
}

/** A local HTTP server whose handler each test sets; it records every request. */
class TestServer {
  readonly seen: Seen[] = [];
  handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(404).end();
  private server!: Server;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        ...(req.headers.range !== undefined && { range: req.headers.range }),
        ...(req.headers.authorization !== undefined && { authorization: req.headers.authorization }),
      });
      this.handler(req, res);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  get base(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Serves `files` (path → bytes) honouring Range. `cutAfter` makes the first request for a path
 * send only that many bytes and then drop the connection (an interrupted transfer).
 */
function fileHandler(files: Record<string, Buffer>, options: { cutAfter?: Record<string, number>; ignoreRange?: boolean } = {}) {
  const cut = new Map(Object.entries(options.cutAfter ?? {}));
  return (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '').split('?')[0];
    const body = files[path];
    if (!body) {
      res.writeHead(404).end('no such file');
      return;
    }
    let start = 0;
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    if (m && !options.ignoreRange) {
      start = Number(m[1]);
      if (start >= body.length) {
        res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end();
        return;
      }
      res.writeHead(206, { 'content-length': body.length - start, 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` });
    } else {
      res.writeHead(200, { 'content-length': body.length });
    }
    const limit = cut.get(path);
    if (limit !== undefined) {
      cut.delete(path);
      // End with FIN after the bytes are flushed (not RST, which can drop bytes in flight): the
      // client sees a body shorter than content-length, deterministically at `limit`.
      res.write(body.subarray(start, limit), () => res.socket?.end());
      return;
    }
    res.end(body.subarray(start));
  };
}

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');
const bytes = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

describe('WeightsFetcher (real HTTP server, real cache directory)', () => {
  let server: TestServer;
  let cacheDir: string;
  beforeEach(async () => {
    server = new TestServer();
    await server.start();
    cacheDir = mkdtempSync(join(tmpdir(), 'llmgw-fetch-'));
  });
  afterEach(async () => {
    await server.stop();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  function fetcher(over: Partial<FetcherSettings> = {}): WeightsFetcher {
    // The test server is on loopback: allowed here explicitly, as an operator would.
    const policy = new SourcePolicy({ schemes: ['http', 'hf'], allowNets: [parseIpNetwork('127.0.0.1/32') as IpNetwork], dirs: [tmpdir()] });
    return new WeightsFetcher(
      new PolicyHttpClient(policy),
      { cacheDir, hfEndpoint: server.base, attempts: 3, retryDelayMs: 10, stallTimeoutMs: 5_000, progressIntervalMs: 0, ...over },
      SILENT_LOGGER,
      policy,
    );
  }

  it('an interrupted download keeps its partial file; the next fetch resumes it with Range, checks size and sha256, renames it', async () => {
    const body = bytes(1_000_000, 1);
    server.handler = fileHandler({ '/m/model.gguf': body }, { cutAfter: { '/m/model.gguf': 300_000 } });
    const source = `${server.base}/m/model.gguf`;
    const name = cacheName(source) as string;
    const request = { source, cacheName: name, sizeBytes: body.length, sha256: sha256(body) };

    // One attempt only: the transfer breaks and the partial file stays for the next fetch.
    await expect(fetcher({ attempts: 1 }).fetch(request)).rejects.toThrow(/failed after 1 request/);
    expect(existsSync(join(cacheDir, name))).toBe(false);
    // What reached the disk before the break is a prefix of the file, at most the cut; how much
    // of the cut got there depends on socket and write buffering, so the resume offset is read back.
    const kept = readFileSync(join(cacheDir, `${name}.partial`));
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThanOrEqual(300_000);
    expect(kept.equals(body.subarray(0, kept.length))).toBe(true);

    const progress: number[] = [];
    const outcome = await fetcher().fetch(request, (p) => progress.push(p.fetchedBytes));
    expect(outcome).toMatchObject({ path: join(cacheDir, name), bytes: body.length, alreadyPresent: false });
    expect(outcome.message).toMatch(new RegExp(`resumed from byte ${kept.length}\\b`));
    expect(server.seen.map((s) => s.range)).toEqual([undefined, `bytes=${kept.length}-`]);
    expect(readFileSync(join(cacheDir, name)).equals(body)).toBe(true);
    expect(existsSync(join(cacheDir, `${name}.partial`))).toBe(false);
    expect(progress[progress.length - 1]).toBe(body.length);
    expect(progress[0]).toBeGreaterThan(kept.length);

    // Present now: nothing is downloaded again.
    const again = await fetcher().fetch(request);
    expect(again.alreadyPresent).toBe(true);
    expect(server.seen).toHaveLength(2);
  });

  it('within one fetch, a broken transfer is retried from where it stopped', async () => {
    const body = bytes(500_000, 2);
    server.handler = fileHandler({ '/w.bin': body }, { cutAfter: { '/w.bin': 123_456 } });
    const source = `${server.base}/w.bin`;
    const outcome = await fetcher().fetch({ source, cacheName: cacheName(source) as string, sha256: sha256(body) });
    expect(outcome.bytes).toBe(body.length);
    const ranges = server.seen.map((s) => s.range);
    expect(ranges).toHaveLength(2);
    expect(ranges[0]).toBeUndefined();
    // The retry asks for the rest from what reached the disk: somewhere after 0, at most the cut.
    const from = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? '')?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(123_456);
  });

  it('a server that ignores Range is answered by starting over, and the result is still exact', async () => {
    const body = bytes(400_000, 3);
    server.handler = fileHandler({ '/w.bin': body }, { cutAfter: { '/w.bin': 100_000 }, ignoreRange: true });
    const source = `${server.base}/w.bin`;
    const outcome = await fetcher().fetch({ source, cacheName: cacheName(source) as string, sizeBytes: body.length, sha256: sha256(body) });
    expect(outcome.bytes).toBe(body.length);
    expect(readFileSync(outcome.path).equals(body)).toBe(true);
  });

  it('a wrong checksum is refused: nothing under the cache name, the partial file deleted', async () => {
    const body = bytes(50_000, 4);
    server.handler = fileHandler({ '/w.bin': body });
    const source = `${server.base}/w.bin`;
    const name = cacheName(source) as string;
    const wrong = sha256(Buffer.from('something else'));
    await expect(fetcher().fetch({ source, cacheName: name, sha256: wrong })).rejects.toThrow(`sha256 is ${sha256(body)}, expected ${wrong}`);
    expect(readdirSync(cacheDir)).toEqual([]);
    // Not retried: a checksum cannot become right by downloading the same bytes again.
    expect(server.seen).toHaveLength(1);
  });

  it('a size the server contradicts is refused before downloading', async () => {
    server.handler = fileHandler({ '/w.bin': bytes(10_000, 5) });
    const source = `${server.base}/w.bin`;
    await expect(fetcher().fetch({ source, cacheName: cacheName(source) as string, sizeBytes: 9_999 })).rejects.toThrow('has 10000 bytes, expected 9999');
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it('an HTTP 404 fails at once with the status; a cache name that is not the source’s is refused', async () => {
    const source = `${server.base}/missing.bin`;
    await expect(fetcher().fetch({ source, cacheName: cacheName(source) as string })).rejects.toThrow(/answered HTTP 404/);
    expect(server.seen).toHaveLength(1);
    await expect(fetcher().fetch({ source, cacheName: 'llmgw-0000000000000000-missing.bin' })).rejects.toThrow(/is not the cache name of/);
    await expect(fetcher().fetch({ source, cacheName: '../../etc/passwd' })).rejects.toThrow(/is not the cache name of/);
    expect(server.seen).toHaveLength(1);
  });

  it('two fetches of one cache name share one download', async () => {
    const body = bytes(300_000, 6);
    server.handler = fileHandler({ '/w.bin': body });
    const source = `${server.base}/w.bin`;
    const f = fetcher();
    const request = { source, cacheName: cacheName(source) as string };
    const [a, b] = await Promise.all([f.fetch(request), f.fetch(request)]);
    expect(a).toBe(b);
    expect(server.seen).toHaveLength(1);
  });

  it('hf://org/repo/file@rev resolves against HF_ENDPOINT with the token, following the redirect to the file', async () => {
    const body = bytes(70_000, 7);
    const files = { '/cdn/blob-123': body };
    const serveFile = fileHandler(files);
    server.handler = (req, res) => {
      if (req.url === '/acme/tiny-model/resolve/v1.0/sub/model.gguf') {
        if (req.headers.authorization !== 'Bearer hf_test_token') return void res.writeHead(401).end();
        return void res.writeHead(302, { location: '/cdn/blob-123' }).end();
      }
      serveFile(req, res);
    };
    const source = 'hf://acme/tiny-model/sub/model.gguf@v1.0';
    const name = cacheName(source) as string;
    const outcome = await fetcher({ hfToken: 'hf_test_token' }).fetch({ source, cacheName: name, sha256: sha256(body) });
    expect(outcome.path).toBe(join(cacheDir, name));
    expect(readFileSync(outcome.path).equals(body)).toBe(true);
    expect(server.seen[0]).toMatchObject({ url: '/acme/tiny-model/resolve/v1.0/sub/model.gguf', authorization: 'Bearer hf_test_token' });
  });

  it('hf://org/repo@rev downloads every listed file into a directory named by the cache name, resuming an interrupted repository', async () => {
    const files = { 'config.json': Buffer.from('{"arch":"llama"}'), 'model-00001.safetensors': bytes(250_000, 8), 'tokenizer/tokenizer.json': Buffer.from('{"v":1}') };
    const served: Record<string, Buffer> = {};
    for (const [f, b] of Object.entries(files)) served[`/acme/big/resolve/main/${f.split('/').map(encodeURIComponent).join('/')}`] = b;
    const serveFile = fileHandler(served, { cutAfter: { '/acme/big/resolve/main/model-00001.safetensors': 100_000 } });
    server.handler = (req, res) => {
      if (req.url === '/api/models/acme/big/revision/main') {
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ siblings: Object.keys(files).map((rfilename) => ({ rfilename })) }));
      }
      serveFile(req, res);
    };
    const source = 'hf://acme/big@main';
    const name = cacheName(source) as string;
    const total = Object.values(files).reduce((n, b) => n + b.length, 0);

    await expect(fetcher({ attempts: 1 }).fetch({ source, cacheName: name })).rejects.toThrow();
    expect(existsSync(join(cacheDir, name))).toBe(false);
    expect(existsSync(join(cacheDir, `${name}.partial`, 'config.json'))).toBe(true);

    const outcome = await fetcher().fetch({ source, cacheName: name, sizeBytes: total });
    expect(outcome.bytes).toBe(total);
    for (const [f, b] of Object.entries(files)) expect(readFileSync(join(cacheDir, name, f)).equals(b)).toBe(true);
    expect(readdirSync(cacheDir)).toEqual([name]);
    // config.json was complete from the first run: fetched once. The big file resumed.
    expect(server.seen.filter((s) => s.url.endsWith('/config.json'))).toHaveLength(1);
    expect(server.seen.filter((s) => s.url.endsWith('.safetensors')).map((s) => s.range)).toEqual([undefined, 'bytes=100000-']);
  });

  it('a repository listing with a path that escapes the directory is refused, nothing written outside', async () => {
    server.handler = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ siblings: [{ rfilename: 'ok.json' }, { rfilename: '../../escape.sh' }] }));
    };
    const source = 'hf://acme/evil@main';
    await expect(fetcher().fetch({ source, cacheName: cacheName(source) as string })).rejects.toThrow(/siblings\[1\]\.rfilename "\.\.\/\.\.\/escape\.sh" is not a safe relative path/);
    expect(readdirSync(cacheDir)).toEqual([]);
    expect(server.seen).toHaveLength(1);
  });

  it('file:// sources are used in place, never copied', async () => {
    const file = join(cacheDir, '..', `operator-model-${process.pid}.gguf`);
    writeFileSync(file, 'weights');
    try {
      const outcome = await fetcher().fetch({ source: `file://${file}`, cacheName: '' });
      expect(outcome).toMatchObject({ path: file, alreadyPresent: true });
      expect(readdirSync(cacheDir)).toEqual([]);
      await expect(fetcher().fetch({ source: `file://${file}.missing`, cacheName: '' })).rejects.toThrow(/does not exist on this node/);
    } finally {
      rmSync(file, { force: true });
    }
  });
});
