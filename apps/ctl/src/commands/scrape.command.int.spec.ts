import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fixturePath } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIo } from '../cli-io';
import { runCli } from '../cli';
import { createScrapeCommand, scrapeCommand } from './scrape.command';

interface Captured {
  code: number;
  out: string;
  err: string;
}

async function run(argv: string[], cwd: string, command = scrapeCommand): Promise<Captured> {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => (out += t), err: (t) => (err += t), isTTY: false, cwd };
  const code = await runCli([command], argv, io);
  return { code, out, err };
}

const V1_TWO_ENGINES = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a"} 3.0
vllm:num_requests_running{engine="1",model_name="a"} 4.0
vllm:num_requests_running{engine="0",model_name="b"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="a"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.25
`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'llmgw-scrape-'));
  writeFileSync(join(dir, 'v1.prom'), V1_TWO_ENGINES);
  writeFileSync(join(dir, 'broken.prom'), 'ok 1\nbad{label=unquoted} 2\n');
  // The vLLM docs sample minus its doc-only lines (`$ curl`, `...`).
  const docs = readFileSync(fixturePath('vllm', 'vllm_docs_design_metrics_example_output.prom'), 'utf8');
  writeFileSync(join(dir, 'vllm-docs.prom'), docs.split('\n').filter((l) => l !== '...' && !l.startsWith('$ curl')).join('\n'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('llmgw scrape FILE', () => {
  it('real llama.cpp excerpt (no KV metric, cut before the gauges): every field absent, shown as -', async () => {
    const r = await run(['scrape', '--engine', 'llamacpp', fixturePath('llamacpp', 'llama_server_metrics_excerpt.prom')], dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^running\s+-\s+llamacpp:requests_processing$/m);
    expect(r.out).toMatch(/^waiting\s+-\s+llamacpp:requests_deferred$/m);
    expect(r.out).toMatch(/^kvUsage\s+-\s+llamacpp:kv_cache_usage_ratio$/m);
    expect(r.err).toBe('');
  });

  it('same in JSON: absent fields are omitted, never 0', async () => {
    const r = await run(['scrape', '--engine', 'llamacpp', '--json', fixturePath('llamacpp', 'llama_server_metrics_excerpt.prom')], dir);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({});
  });

  it('real vLLM docs sample (relative path from cwd): running 8, the rest -', async () => {
    const r = await run(['scrape', '--engine', 'vllm', 'vllm-docs.prom'], dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^running\s+8\s+vllm:num_requests_running$/m);
    expect(r.out).toMatch(/^waiting\s+-\s/m);
    expect(r.out).toMatch(/^kvUsage\s+-\s+vllm:kv_cache_usage_perc \| vllm:gpu_cache_usage_perc$/m);
  });

  it('vLLM v1 per-engine series are summed; --model filters by model_name', async () => {
    const all = await run(['scrape', '--engine', 'vllm', '--json', join(dir, 'v1.prom')], dir);
    expect(JSON.parse(all.out)).toEqual({ running: 8, waiting: 2, kvUsage: 0.25 });
    const b = await run(['scrape', '--engine', 'vllm', '--model', 'b', '--json', join(dir, 'v1.prom')], dir);
    expect(JSON.parse(b.out)).toEqual({ running: 1 });
  });

  it('accepts a file:// URL', async () => {
    const r = await run(['scrape', '--engine', 'vllm', '--json', pathToFileURL(join(dir, 'v1.prom')).href], dir);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).running).toBe(8);
  });

  it('the raw vLLM docs sample is refused, naming the line (its `$ curl` line)', async () => {
    const file = fixturePath('vllm', 'vllm_docs_design_metrics_example_output.prom');
    const r = await run(['scrape', '--engine', 'vllm', file], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('line 2: ');
    expect(r.out).toBe('');
  });

  it('a parse error exits 1 naming the file and line', async () => {
    const r = await run(['scrape', '--engine', 'vllm', 'broken.prom'], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('broken.prom');
    expect(r.err).toContain("line 2: expected '\"' to open the value of label 'label'");
  });

  it('a missing file exits 1 naming it', async () => {
    const r = await run(['scrape', '--engine', 'vllm', 'nope.prom'], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('nope.prom: no such file');
  });
});

describe('llmgw scrape usage errors', () => {
  it.each([
    ['bad engine', ['scrape', '--engine', 'tgi', 'x.prom'], "unknown engine 'tgi'"],
    ['no engine', ['scrape', 'x.prom'], '--engine is required'],
    ['no source', ['scrape', '--engine', 'vllm'], 'FILE or URL is required'],
    ['two sources', ['scrape', '--engine', 'vllm', 'a', 'b'], 'one FILE or URL, got 2'],
    ['unknown flag', ['scrape', '--engine', 'vllm', '--bogus', 'a'], '--bogus'],
  ])('%s → exit 2 with the usage line', async (_t, argv, msg) => {
    const r = await run(argv, dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain(msg);
    expect(r.err).toContain('usage: llmgw scrape --engine vllm|llamacpp FILE|URL [--model NAME] [--json]');
  });
});

describe('llmgw scrape URL', () => {
  let server: Server;
  let base: string;
  const seen: IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers);
      if (req.url === '/metrics') {
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
        res.end(V1_TWO_ENGINES);
      } else if (req.url === '/down') {
        res.writeHead(503);
        res.end('loading');
      } else if (req.url === '/hang') {
        // never answers: the command's timeout must end the wait
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((ok) => server.close(() => ok()));
  });

  it('GETs /metrics asking for the text format and prints the load', async () => {
    const r = await run(['scrape', '--engine', 'vllm', `${base}/metrics`], dir);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^running\s+8\s/m);
    expect(r.out).toMatch(/^waiting\s+2\s/m);
    expect(r.out).toMatch(/^kvUsage\s+0\.25\s/m);
    expect(seen.at(-1)?.accept).toContain('text/plain; version=0.0.4');
  });

  it('an HTTP error status exits 1 naming the URL and status', async () => {
    const r = await run(['scrape', '--engine', 'vllm', `${base}/down`], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`GET ${base}/down: HTTP 503`);
  });

  it('a server that never answers is given up on after the timeout', async () => {
    const started = performance.now();
    const r = await run(['scrape', '--engine', 'vllm', `${base}/hang`], dir, createScrapeCommand({ timeoutMs: 300 }));
    expect(r.code).toBe(1);
    expect(r.err).toContain('no complete answer within 300 ms');
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('a refused connection exits 1 naming the URL', async () => {
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((ok) => closed.close(() => ok()));
    const r = await run(['scrape', '--engine', 'vllm', `http://127.0.0.1:${port}/metrics`], dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`GET http://127.0.0.1:${port}/metrics: `);
  });
});
