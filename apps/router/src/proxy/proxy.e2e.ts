// The router's hot path against real HTTP upstreams: bytes through untouched, load-aware
// choice, admission (queue, 429, 503), breakers, retries and cut streams. The router runs in
// this process as a real server on port 0; the engines are tiny programmable HTTP servers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { waitFor , fixturesDir } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import {
  answerOk,
  FakeUpstream,
  postJson,
  RawClient,
  sampleValue,
  startRouter,
  tempDir,
  vllmMetrics,
  writeRouterConfig,
  type RouterUnderTest,
} from '../test/router.harness';

const FIXTURES = join(fixturesDir(), 'openai');
const dir = tempDir();
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function upstream(init: Parameters<typeof FakeUpstream.start>[0] = {}): Promise<FakeUpstream> {
  const u = await FakeUpstream.start(init);
  cleanups.push(() => u.close());
  return u;
}

/** A router in static mode over `endpoints` (all serving model m1, alias m1-alias; m2 has none); `m1` adds catalog fields to m1. */
async function router(endpoints: { id: string; url: string }[], env: Record<string, string> = {}, m1: Record<string, unknown> = {}): Promise<RouterUnderTest> {
  const file = writeRouterConfig(dir, {
    models: [
      { name: 'm1', aliases: ['m1-alias'], engine: 'vllm', ...m1 },
      { name: 'm2', engine: 'vllm' },
    ],
    endpoints: endpoints.map((e) => ({ id: e.id, model: 'm1', url: e.url })),
  });
  const r = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: file, LLMGW_ROUTER_SCRAPE_INTERVAL: '100ms', ...env });
  cleanups.push(() => r.close());
  return r;
}

/**
 * The load-aware choice itself (the least-load policy): identical requests spread by load. Under
 * the default for chat (prefix-affinity, see prefix-affinity.e2e.ts) they would share one home
 * replica until it carries more than its share.
 */
const LEAST_LOAD = { routing: { policy: 'least-load' } };

const chat = (model = 'm1', extra: object = {}): object => ({ model, messages: [{ role: 'user', content: 'hi' }], ...extra });

async function metricsText(r: RouterUnderTest): Promise<string> {
  return (await fetch(`${r.url}/metrics`)).text();
}

describe('bytes through untouched', () => {
  it.each(['openai_chat_stream_173417d55340.sse', 'openai_chat_stream_4cc50a6135d2.sse'])(
    'a recorded OpenAI SSE stream (%s) arrives byte-identical, and the official client reads it',
    async (file) => {
      const recorded = readFileSync(join(FIXTURES, file));
      const u = await upstream({
        respond: (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
          // Irregular chunks, cut mid-line and mid-UTF-8, as TCP may deliver them.
          let at = 0;
          const next = (): void => {
            if (at >= recorded.length) return void res.end();
            const size = 1 + ((at * 7919) % 97);
            res.write(recorded.subarray(at, at + size));
            at += size;
            setImmediate(next);
          };
          next();
        },
      });
      const r = await router([{ id: 'a', url: u.url }]);

      const raw = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat('m1', { stream: true })) });
      expect(raw.status).toBe(200);
      expect(raw.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      // The debug header is opt-in (LLMGW_ROUTER_DEBUG_HEADER): replicas are not named to clients by default.
      expect(raw.headers.get('x-llmgw-route')).toBeNull();
      expect(Buffer.from(await raw.arrayBuffer()).equals(recorded)).toBe(true);

      const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const stream = await client.chat.completions.create({ model: 'm1-alias', messages: [{ role: 'user', content: 'hi' }], stream: true });
      const chunks: unknown[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      const expected = recorded
        .toString('utf8')
        .split('\n')
        .filter((l) => l.startsWith('data: {'));
      expect(chunks).toEqual(expected.map((l) => JSON.parse(l.slice(6))));
    },
  );

  it('forwards the original request bytes (key order, spacing, unknown fields) and the query string', async () => {
    let seen: { body: string; url: string | undefined; auth: string | undefined } | undefined;
    const u = await upstream({
      respond: (req, res, body) => {
        seen = { body: body.toString('utf8'), url: req.url, auth: req.headers.authorization };
        answerOk(req, res, body);
      },
    });
    const r = await router([{ id: 'a', url: u.url }]);
    const body = '{ "messages":[{"role":"user","content":"h\\u00e9llo ✓"}],\n  "model" : "m1-alias", "x_custom": [1,2.50,{"k":null}] }';
    const res = await postJson(`${r.url}/v1/chat/completions?api-version=1`, body, { authorization: 'Bearer client-key' });
    expect(res.status).toBe(200);
    expect(seen).toEqual({ body, url: '/v1/chat/completions?api-version=1', auth: 'Bearer client-key' });
  });

  it('drops a Content-Length the engine sent beside Transfer-Encoding: the chunked body frames the answer', async () => {
    const u = await upstream({
      respond: (_req, res) => {
        // Both headers, as a sloppy engine might send them; RFC 9112 §6.3: Transfer-Encoding wins.
        res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'content-length': '999' });
        res.write('{"id":');
        res.end('"x"}');
      },
    });
    const r = await router([{ id: 'a', url: u.url }]);
    const res = await postJson(`${r.url}/v1/chat/completions`, JSON.stringify(chat()));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBeNull();
    expect(res.text).toBe('{"id":"x"}');
  });
});

describe('OpenAI-shaped refusals', () => {
  it('answers bad requests with the OpenAI error shape and the right status', async () => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_MAX_BODY_BYTES: '1024' });
    const shape = (code: string, param: string | null = null) => ({ error: { message: expect.any(String), type: expect.any(String), param, code } });

    const cases: [string, () => Promise<{ status: number; json: unknown }>, number, object][] = [
      ['malformed JSON', () => postJson(`${r.url}/v1/chat/completions`, '{"model": "m1",'), 400, shape('invalid_json')],
      ['not an object', () => postJson(`${r.url}/v1/completions`, '[1,2]'), 400, shape('invalid_request')],
      ['no model', () => postJson(`${r.url}/v1/embeddings`, { input: 'x' }), 400, shape('invalid_request', 'model')],
      ['unknown model', () => postJson(`${r.url}/v1/chat/completions`, chat('nope')), 404, shape('model_not_found', 'model')],
      ['body over the limit', () => postJson(`${r.url}/v1/chat/completions`, chat('m1', { pad: 'x'.repeat(2000) })), 413, shape('request_too_large')],
      ['unknown route', () => postJson(`${r.url}/v1/images/generations`, {}), 404, shape('unknown_url')],
      ['malformed escape in a model id', async () => {
        const res = await fetch(`${r.url}/v1/models/%E0%A4%A`);
        return { status: res.status, json: await res.json() };
      }, 404, shape('model_not_found', 'model')],
      ['wrong method', async () => {
        const res = await fetch(`${r.url}/v1/chat/completions`);
        return { status: res.status, json: await res.json() };
      }, 405, shape('method_not_allowed')],
    ];
    for (const [name, call, status, body] of cases) {
      const res = await call();
      expect({ name, status: res.status, json: res.json }).toEqual({ name, status, json: body });
    }
    expect(u.hits).toBe(0);

    // A chunked body (no Content-Length) over the limit is refused too, without reading it all.
    const big = await fetch(`${r.url}/v1/chat/completions`, {
      method: 'POST',
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(`{"model":"m1","pad":"${'y'.repeat(4096)}`));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(big.status).toBe(413);
    expect(await big.json()).toEqual(shape('request_too_large'));
  });

  it('checks API keys before anything else, and keeps the router key from the engine', async () => {
    let authSeen: string | undefined = 'unset';
    const u = await upstream({
      respond: (req, res, body) => {
        authSeen = req.headers.authorization;
        answerOk(req, res, body);
      },
    });
    const keys = writeRouterConfig(dir, { keys: [{ name: 'team-a', key: 'sk-team-a-0123456789abcdef' }] });
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_API_KEYS_FILE: keys });
    const unauthorized = { error: { message: expect.any(String), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } };

    const attempts: Record<string, string>[] = [{}, { authorization: 'Bearer wrong-key-0123456789' }, { authorization: 'sk-team-a-0123456789abcdef' }];
    for (const headers of attempts) {
      // Even a malformed body or an unknown route is answered 401 first.
      const res = await postJson(`${r.url}/v1/not-a-route`, '{oops', headers);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(res.json).toEqual(unauthorized);
    }
    const ok = await postJson(`${r.url}/v1/chat/completions`, chat(), { authorization: 'Bearer sk-team-a-0123456789abcdef' });
    expect(ok.status).toBe(200);
    expect(authSeen).toBeUndefined();
    // Operational endpoints stay open to the orchestrator.
    expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
    expect(sampleValue(await metricsText(r), 'llmgw_router_auth_failures_total')).toBe(3);
  });
});

describe('engine errors', () => {
  it('normalises an engine error body into the OpenAI shape, keeping status, message and other headers', async () => {
    const answers: Record<string, (res: import('node:http').ServerResponse) => void> = {
      // The tiny model's llama.cpp answer to POST /v1/embeddings, as issue #13 saw it.
      '/v1/embeddings': (res) => res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' }).end('{"error":{"code":404,"message":"File Not Found: POST /v1/embeddings"}}'),
      // Older vLLM's ErrorResponse, sent chunked.
      '/v1/completions': (res) => {
        res.writeHead(400, { 'content-type': 'application/json', 'x-request-id': 'engine-1' });
        res.write('{"object":"error","message":"max_tokens must be at least 1",');
        res.end('"type":"BadRequestError","param":null,"code":400}');
      },
      '/v1/chat/completions': (res) => res.writeHead(429, { 'content-type': 'text/plain', 'retry-after': '3' }).end('too many requests\n'),
    };
    const u = await upstream({ respond: (req, res) => answers[req.url ?? '']?.(res) });
    const r = await router([{ id: 'a', url: u.url }]);

    const embeddings = await fetch(`${r.url}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ model: 'm1', input: 'hi' }) });
    expect(embeddings.status).toBe(404);
    expect(embeddings.headers.get('content-type')).toBe('application/json');
    expect(await embeddings.text()).toBe('{"error":{"message":"File Not Found: POST /v1/embeddings","type":"invalid_request_error","param":null,"code":null}}');

    const completions = await fetch(`${r.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm1', prompt: 'hi', max_tokens: 0 }) });
    expect(completions.status).toBe(400);
    expect(completions.headers.get('x-request-id')).toBe('engine-1');
    expect(await completions.json()).toEqual({ error: { message: 'max_tokens must be at least 1', type: 'BadRequestError', param: null, code: null } });

    // The official client reads each as an API error with the engine's message and a string-or-null code.
    const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const caught = await client.embeddings.create({ model: 'm1', input: 'hi' }).catch((e: unknown) => e);
    expect(caught).toBeInstanceOf(OpenAI.NotFoundError);
    expect(caught).toMatchObject({ status: 404, code: null, type: 'invalid_request_error', message: expect.stringContaining('File Not Found: POST /v1/embeddings') });
    const limited = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect(limited).toMatchObject({ status: 429, code: null, message: expect.stringContaining('too many requests') });
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('3');
  });
});

describe('endpoints a model serves', () => {
  it('refuses, in the OpenAI shape and without asking an engine, an endpoint the model does not serve', async () => {
    const u = await upstream();
    const file = writeRouterConfig(dir, {
      models: [
        { name: 'chatty', aliases: ['chatty-alias'], engine: 'llamacpp', endpoints: ['chat', 'completions'] },
        { name: 'embedder', engine: 'vllm', endpoints: ['embeddings'] },
      ],
      endpoints: [
        { id: 'c', model: 'chatty', url: u.url },
        { id: 'e', model: 'embedder', url: u.url },
      ],
    });
    const r = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: file });
    cleanups.push(() => r.close());
    const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'unused', maxRetries: 0 });

    const refused = await client.embeddings.create({ model: 'chatty-alias', input: 'hi' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, code: 'unsupported_endpoint', param: 'model', type: 'invalid_request_error' });
    expect((refused as Error).message).toMatch(/`chatty`.*\/v1\/embeddings/);
    const chatRefused = await client.chat.completions.create({ model: 'embedder', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(chatRefused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((chatRefused as Error).message).toMatch(/`embedder`.*\/v1\/chat\/completions.*it serves \/v1\/embeddings/);
    expect(u.hits).toBe(0);

    // What each does serve still goes through.
    expect((await postJson(`${r.url}/v1/chat/completions`, chat('chatty'))).status).toBe(200);
    expect((await postJson(`${r.url}/v1/embeddings`, { model: 'embedder', input: 'hi' })).status).toBe(200);
    expect(u.hits).toBe(2);
  });
});

describe('load-aware choice', () => {
  it('sends at least 90 % of 200 requests away from an endpoint whose engine reports 20 waiting', async () => {
    const busy = await upstream({ metricsText: vllmMetrics('m1', { running: 8, waiting: 20 }) });
    const idle = await upstream({ metricsText: vllmMetrics('m1', { running: 8, waiting: 0 }) });
    const r = await router(
      [
        { id: 'busy', url: busy.url },
        { id: 'idle', url: idle.url },
      ],
      {},
      LEAST_LOAD,
    );
    await waitFor(() => r.core.endpoints.get('busy')?.lastScrape && r.core.endpoints.get('idle')?.lastScrape, { message: 'both scraped' });

    let sent = 0;
    const worker = async (): Promise<void> => {
      while (sent < 200) {
        sent++;
        expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    expect(busy.hits + idle.hits).toBe(200);
    expect(idle.hits).toBeGreaterThanOrEqual(180);
    const text = await metricsText(r);
    expect(sampleValue(text, 'llmgw_router_engine_load', { endpoint: 'busy', field: 'waiting' })).toBe(20);
    expect(sampleValue(text, 'llmgw_router_endpoint_choices_total', { model: 'm1', endpoint: 'idle' })).toBe(idle.hits);
  });

  it('with no engine metrics, follows the local in-flight count (and never reads the engines as idle)', async () => {
    const a = await upstream();
    const b = await upstream();
    a.respond = a.hold;
    b.respond = b.hold;
    const r = await router(
      [
        { id: 'a', url: a.url },
        { id: 'b', url: b.url },
      ],
      {},
      LEAST_LOAD,
    );
    await waitFor(() => r.core.endpoints.get('a')?.lastScrapeError && r.core.endpoints.get('b')?.lastScrapeError, { message: 'scrapes failed' });

    const pending: Promise<unknown>[] = [];
    for (let i = 1; i <= 10; i++) {
      pending.push(postJson(`${r.url}/v1/chat/completions`, chat()));
      await waitFor(() => a.held.length + b.held.length === i, { message: `request ${i} held` });
      expect(Math.abs(a.held.length - b.held.length)).toBeLessThanOrEqual(1);
    }
    expect([a.held.length, b.held.length]).toEqual([5, 5]);
    const text = await metricsText(r);
    expect(sampleValue(text, 'llmgw_router_in_flight', { endpoint: 'a' })).toBe(5);
    expect(sampleValue(text, 'llmgw_router_engine_load', { endpoint: 'a', field: 'waiting' })).toBeUndefined();
    expect(sampleValue(text, 'llmgw_router_scrape_errors_total', { endpoint: 'a', reason: 'status' })).toBeGreaterThan(0);
    a.releaseHeld();
    b.releaseHeld();
    await Promise.all(pending);
  });
});

describe('admission', () => {
  it('queues while every endpoint is saturated, then answers 429 with Retry-After (queue full at once, queue timeout at the deadline)', async () => {
    const u = await upstream();
    u.respond = u.hold;
    const r = await router([{ id: 'a', url: u.url }], {
      LLMGW_ROUTER_MAX_IN_FLIGHT: '2',
      LLMGW_ROUTER_QUEUE_SIZE: '2',
      LLMGW_ROUTER_QUEUE_TIMEOUT: '400ms',
    });
    const running = [postJson(`${r.url}/v1/chat/completions`, chat()), postJson(`${r.url}/v1/chat/completions`, chat())];
    await waitFor(() => u.held.length === 2, { message: 'two in flight' });
    const started = performance.now();
    const queued = [postJson(`${r.url}/v1/chat/completions`, chat()), postJson(`${r.url}/v1/chat/completions`, chat())];
    await waitFor(() => r.core.admission.depths().get('m1') === 2, { message: 'two queued' });

    const full = await postJson(`${r.url}/v1/chat/completions`, chat());
    expect(full.status).toBe(429);
    expect((full.json as { error: { code: string } }).error.code).toBe('queue_full');
    expect(Number(full.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    for (const res of await Promise.all(queued)) {
      expect(res.status).toBe(429);
      expect(res.json).toEqual({ error: { message: expect.stringContaining('400 ms'), type: 'rate_limit_error', param: null, code: 'queue_timeout' } });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    expect(u.hits).toBe(2);
    u.releaseHeld();
    for (const res of await Promise.all(running)) expect(res.status).toBe(200);
    const text = await metricsText(r);
    expect(sampleValue(text, 'llmgw_router_admission_rejections_total', { model: 'm1', reason: 'queue_full' })).toBe(1);
    expect(sampleValue(text, 'llmgw_router_admission_rejections_total', { model: 'm1', reason: 'queue_timeout' })).toBe(2);
  });

  it('lets a queued request through, in order, as soon as an endpoint frees up', async () => {
    const u = await upstream();
    u.respond = u.hold;
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_MAX_IN_FLIGHT: '1', LLMGW_ROUTER_QUEUE_TIMEOUT: '20s' });
    const first = postJson(`${r.url}/v1/chat/completions`, chat('m1', { n: 1 }));
    await waitFor(() => u.held.length === 1);
    const second = postJson(`${r.url}/v1/chat/completions`, chat('m1', { n: 2 }));
    await waitFor(() => r.core.admission.depths().get('m1') === 1);
    const third = postJson(`${r.url}/v1/chat/completions`, chat('m1', { n: 3 }));
    await waitFor(() => r.core.admission.depths().get('m1') === 2);
    for (const n of [2, 3]) {
      u.releaseHeld();
      await waitFor(() => u.held.length === 1, { message: `request ${n} admitted` });
      expect(JSON.parse(u.held[0].body.toString()).n).toBe(n);
    }
    u.releaseHeld();
    for (const res of await Promise.all([first, second, third])) expect(res.status).toBe(200);
  });

  it('answers 503 with Retry-After for a known model no endpoint serves', async () => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }]);
    const res = await postJson(`${r.url}/v1/chat/completions`, chat('m2'));
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: { message: expect.any(String), type: 'server_error', param: null, code: 'no_endpoints' } });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});

describe('circuit breaker and retries', () => {
  it('opens on an engine answering 500 after the threshold, then probes it once per cooldown', async () => {
    const u = await upstream({
      respond: (_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"engine broke","type":"server_error","param":null,"code":null}}'),
    });
    const r = await router([{ id: 'bad', url: u.url }], { LLMGW_ROUTER_BREAKER_FAILURES: '3', LLMGW_ROUTER_BREAKER_COOLDOWN: '1s' });
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${r.url}/v1/chat/completions`, chat());
      expect(res.status).toBe(500); // the engine's own answer, passed through
      expect(res.text).toContain('engine broke');
    }
    // The breaker opened before this third answer reached the client.
    const opened = performance.now();
    expect(u.hits).toBe(3);
    const open = await postJson(`${r.url}/v1/chat/completions`, chat());
    expect(open.status).toBe(503);
    expect(Number(open.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(u.hits).toBe(3);
    expect(sampleValue(await metricsText(r), 'llmgw_router_breaker_state', { endpoint: 'bad', state: 'open' })).toBe(1);

    // After the cooldown exactly one probe goes through; it fails, so the breaker opens again.
    await waitFor(async () => (await postJson(`${r.url}/v1/chat/completions`, chat())).status === 500, { deadlineMs: 5_000, intervalMs: 50, message: 'probe' });
    expect(performance.now() - opened).toBeGreaterThanOrEqual(800);
    expect(u.hits).toBe(4);
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(503);

    // The engine recovers: the next probe succeeds and the breaker closes.
    u.respond = answerOk;
    await waitFor(async () => (await postJson(`${r.url}/v1/chat/completions`, chat())).status === 200, { deadlineMs: 5_000, intervalMs: 50, message: 'recovery' });
    expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    const text = await metricsText(r);
    expect(sampleValue(text, 'llmgw_router_breaker_state', { endpoint: 'bad', state: 'closed' })).toBe(1);
    for (const [from, to] of [['closed', 'open'], ['open', 'half-open'], ['half-open', 'open'], ['half-open', 'closed']]) {
      expect(sampleValue(text, 'llmgw_router_breaker_transitions_total', { endpoint: 'bad', from, to })).toBeGreaterThanOrEqual(1);
    }
  });

  it('retries a refused connection on another endpoint, opens the dead one, and probes it after the cooldown', async () => {
    const live = await upstream();
    const gone = await FakeUpstream.start();
    const deadUrl = gone.url;
    await gone.close(); // nothing listens there any more
    const r = await router(
      [
        { id: 'dead', url: deadUrl },
        { id: 'live', url: live.url },
      ],
      // The breaker alone: scrapes (which would take the dead endpoint out, see frozen-engine.e2e.ts) are kept out of it.
      { LLMGW_ROUTER_BREAKER_FAILURES: '2', LLMGW_ROUTER_BREAKER_COOLDOWN: '2s', LLMGW_ROUTER_SCRAPE_INTERVAL: '1h', LLMGW_ROUTER_SCORERS: 'queue=3,kv-cache=2,running=1,in-flight=1' },
      LEAST_LOAD,
    );
    const connectErrors = async (): Promise<number> => sampleValue(await metricsText(r), 'llmgw_router_upstream_errors_total', { endpoint: 'dead', kind: 'connect' }) ?? 0;
    await waitFor(
      async () => {
        expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
        return r.core.endpoints.get('dead')?.breaker.state === 'open';
      },
      { deadlineMs: 10_000, intervalMs: 1, message: 'dead endpoint breaker open' },
    );
    expect(await connectErrors()).toBe(2);
    const openedAt = performance.now();
    for (let i = 0; i < 10; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    // While open, nothing is sent to the dead endpoint (checked only if these requests beat the cooldown).
    if (performance.now() - openedAt < 1_900) expect(await connectErrors()).toBe(2);
    await waitFor(
      async () => {
        expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
        return (await connectErrors()) === 3;
      },
      { deadlineMs: 10_000, intervalMs: 20, message: 'dead endpoint probed after the cooldown' },
    );
    expect(sampleValue(await metricsText(r), 'llmgw_router_retries_total', { model: 'm1', reason: 'connect' })).toBe(3);
  });

  it('resends once, on a fresh connection and without blaming the engine, when a pooled connection turns out closed', async () => {
    const served = new WeakMap<object, number>();
    const u = await upstream({
      respond: (req, res, body) => {
        const n = (served.get(req.socket) ?? 0) + 1;
        served.set(req.socket, n);
        // The second request on a kept-alive connection finds it closed under it.
        if (n === 2) req.socket.destroy();
        else answerOk(req, res, body);
      },
    });
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_RETRIES: '0', LLMGW_ROUTER_BREAKER_FAILURES: '1' });
    for (let i = 0; i < 4; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect(u.hits).toBeGreaterThan(4);
    expect(r.core.endpoints.get('a')?.breaker.state).toBe('closed');
  });

  it('answers 502 in the OpenAI shape when every endpoint refuses', async () => {
    const gone = await FakeUpstream.start();
    const url = gone.url;
    await gone.close();
    const r = await router([{ id: 'dead', url }]);
    const res = await postJson(`${r.url}/v1/chat/completions`, chat());
    expect(res.status).toBe(502);
    expect(res.json).toEqual({ error: { message: expect.stringContaining('ECONNREFUSED'), type: 'server_error', param: null, code: 'upstream_unavailable' } });
  });

  it('retries a 503 from the engine and a hung engine (first-byte timeout) on another endpoint', async () => {
    const overloaded = await upstream({ respond: (_req, res) => res.writeHead(503).end('busy') });
    const hung = await upstream();
    hung.respond = hung.hold;
    const good = await upstream();
    const r = await router(
      [
        { id: 'overloaded', url: overloaded.url },
        { id: 'hung', url: hung.url },
        { id: 'good', url: good.url },
      ],
      { LLMGW_ROUTER_FIRST_BYTE_TIMEOUT: '300ms' },
    );
    for (let i = 0; i < 6; i++) expect((await postJson(`${r.url}/v1/chat/completions`, chat())).status).toBe(200);
    expect(good.hits).toBe(6);
    expect(overloaded.hits + hung.hits).toBeGreaterThan(0);
  });
});

describe('a streamed head held until the first content', () => {
  const role = 'data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n';
  const content = 'data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\ndata: [DONE]\n\n';

  it('answers 502 in the OpenAI shape, not a broken 200 stream, when the only engine dies after its head and role chunk', async () => {
    const u = await upstream({
      respond: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(role, () => res.destroy());
      },
    });
    const r = await router([{ id: 'a', url: u.url }]);
    const res = await postJson(`${r.url}/v1/chat/completions`, chat('m1', { stream: true }));
    expect(res.status).toBe(502);
    expect(res.json).toEqual({ error: { message: expect.stringMatching(/failed before answering/), type: expect.any(String), param: null, code: expect.any(String) } });
    expect(sampleValue(await metricsText(r), 'llmgw_router_stream_errors_total', { model: 'm1' })).toBeUndefined();
  });

  it('sends the head and role chunk on when no content comes within the hold bound, then streams the rest untouched', async () => {
    let go: (() => void) | undefined;
    const u = await upstream({
      respond: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(role);
        go = () => res.end(content);
      },
    });
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_HOLD_UNTIL_CONTENT: '200ms' });
    // The engine sends nothing more until the client has the head: only the bound can release it.
    const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat('m1', { stream: true })) });
    expect(res.status).toBe(200);
    expect(go).toBeDefined();
    go?.();
    expect(await res.text()).toBe(role + content);
  });
});

describe('after the first byte', () => {
  const twoEvents = 'data: {"id":"1","choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"id":"1","choices":[{"index":0,"delta":{"content":"b"}}]}\n\n';

  it.each([
    ['the engine closes the connection', 'cut'],
    ['the engine goes silent past the idle timeout', 'silent'],
  ])('ends an SSE stream with an OpenAI-shaped error event when %s', async (_name, how) => {
    const u = await upstream({
      respond: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(twoEvents);
        if (how === 'cut') setTimeout(() => res.destroy(), 20);
      },
    });
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_IDLE_TIMEOUT: '300ms' });
    const started = performance.now();
    const res = await fetch(`${r.url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(chat('m1', { stream: true })) });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(text.startsWith(twoEvents)).toBe(true);
    const last = text.slice(twoEvents.length);
    expect(last.endsWith('\n\n')).toBe(true);
    expect(JSON.parse(last.replace(/^data: /, ''))).toEqual({ error: { message: expect.any(String), type: 'server_error', param: null, code: 'stream_interrupted' } });
    // The official client surfaces it as an error rather than hanging or ending quietly.
    const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'hi' }], stream: true });
    await expect(
      (async () => {
        for await (const _ of stream) void _;
      })(),
    ).rejects.toThrow(/stopped in the middle/);
    expect(sampleValue(await metricsText(r), 'llmgw_router_stream_errors_total', { model: 'm1' })).toBe(2);
  });
});

/** How long a client of the router is willing to wait for `GET /v1/models` while others attack it. */
const PATIENCE_MS = 5_000;

describe('hostile clients', () => {
  it('refuses 16 MB deeply nested bodies (four at once) with a 400 naming the depth limit, while GET /v1/models keeps answering', async () => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }]);
    // {"model":"m1","x":[[[…]]]} — 16 MB, about 8 million levels deep.
    const levels = 8 * 1024 * 1024 - 16;
    const prefix = Buffer.from('{"model":"m1","x":');
    const body = Buffer.alloc(prefix.length + 2 * levels + 1);
    prefix.copy(body);
    body.fill('[', prefix.length, prefix.length + levels);
    body.fill(']', prefix.length + levels, body.length - 1);
    body[body.length - 1] = 0x7d;
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;

    let attacking = true;
    const latencies: number[] = [];
    const poll = (async () => {
      while (attacking) {
        const started = performance.now();
        const res = await fetch(`${r.url}/v1/models`, { signal: AbortSignal.timeout(PATIENCE_MS) });
        expect(res.status).toBe(200);
        await res.arrayBuffer();
        latencies.push(performance.now() - started);
      }
    })();
    const attackers = Array.from({ length: 4 }, () => RawClient.to(r));
    for (const a of attackers) a.send(Buffer.concat([Buffer.from(head, 'latin1'), body]));
    const answers = await Promise.all(attackers.map((a) => a.response(60_000)));
    attacking = false;
    await poll;

    for (const a of answers) {
      expect(a.status).toBe(400);
      expect(a.json).toEqual({
        error: { message: 'Request body nests JSON deeper than the limit of 64 levels.', type: 'invalid_request_error', param: null, code: 'json_too_deep' },
      });
    }
    expect(latencies.length).toBeGreaterThan(0);
    expect(u.hits).toBe(0);
    for (const a of attackers) a.close();
  });

  it('reads JSON exactly as deep as LLMGW_ROUTER_MAX_JSON_DEPTH and refuses one level more, sending the original bytes on', async () => {
    let seen = '';
    const u = await upstream({
      respond: (req, res, b) => {
        seen = b.toString('utf8');
        answerOk(req, res, b);
      },
    });
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_MAX_JSON_DEPTH: '3' });
    const ok = '{ "x" : [ [ 1 ] ] ,"model":"m1"}';
    expect((await postJson(`${r.url}/v1/chat/completions`, ok)).status).toBe(200);
    expect(seen).toBe(ok);
    const deep = await postJson(`${r.url}/v1/chat/completions`, '{"model":"m1","x":[[[1]]]}');
    expect(deep.status).toBe(400);
    expect(deep.json).toMatchObject({ error: { code: 'json_too_deep', message: expect.stringContaining('limit of 3 levels') } });
    expect(u.hits).toBe(1);
  });

  it('with API keys on, answers 20 unauthenticated 16 MB uploads with 401 from the head, before their bodies are sent, and closes them', async () => {
    const u = await upstream();
    const keys = writeRouterConfig(dir, { keys: [{ name: 'team-a', key: 'sk-team-a-0123456789abcdef' }] });
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_API_KEYS_FILE: keys });
    const declared = 16 * 1024 * 1024;
    const clients = Array.from({ length: 20 }, (_, k) => {
      const c = RawClient.to(r);
      const auth = k % 2 === 0 ? '' : 'Authorization: Bearer wrong-key-0123456789\r\n';
      // 64 KB of the 16 MB declared: the rest is never sent, so only an answer from the head arrives.
      c.send(`POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\n${auth}Content-Length: ${declared}\r\n\r\n{"model":"m1","pad":"${'p'.repeat(64 * 1024)}`);
      return c;
    });
    for (const c of clients) {
      const res = await c.response();
      expect(res.status).toBe(401);
      expect(res.head).toMatch(/\r\nconnection: close/i);
      expect(res.json).toMatchObject({ error: { code: 'invalid_api_key' } });
      await c.closed();
    }
    expect(u.hits).toBe(0);
    // A good key still gets its body read and proxied.
    expect((await postJson(`${r.url}/v1/chat/completions`, chat(), { authorization: 'Bearer sk-team-a-0123456789abcdef' })).status).toBe(200);
  });

  it('answers 408 in the OpenAI shape to a body trickling in below LLMGW_ROUTER_MIN_BODY_RATE after the grace period, and closes', async () => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_MIN_BODY_RATE: '100000', LLMGW_ROUTER_BODY_RATE_GRACE: '200ms' });
    const c = RawClient.to(r);
    c.send('POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Length: 1000000\r\n\r\n{"model":"m1",');
    const res = await c.response();
    expect(res.status).toBe(408);
    expect(res.json).toEqual({ error: { message: 'The request body arrived slower than the minimum of 100000 bytes/s.', type: 'invalid_request_error', param: null, code: 'request_timeout' } });
    await c.closed();
    expect(u.hits).toBe(0);
  });

  it('closes connections past LLMGW_ROUTER_MAX_CONNECTIONS as they arrive, counts them, and serves again once one closes', async () => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }], { LLMGW_ROUTER_MAX_CONNECTIONS: '3' });
    const models = 'GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\n';
    const held = Array.from({ length: 3 }, () => RawClient.to(r));
    for (const c of held) {
      c.send(models);
      expect((await c.response()).status).toBe(200);
    }
    const extra = RawClient.to(r);
    extra.send(models);
    await extra.closed();
    expect(extra.received).toBe('');

    held[0].close();
    const again = await waitFor(async () => {
      const c = RawClient.to(r);
      c.send(models);
      const ok = await c.response(1_000).then((res) => res.status === 200, () => false);
      c.close();
      return ok || undefined;
    });
    expect(again).toBe(true);
    for (const c of held) c.close();
    const text = await waitFor(async () => metricsText(r).catch(() => undefined));
    expect(sampleValue(text, 'llmgw_router_connections_refused_total')).toBeGreaterThanOrEqual(1);
  });
});

describe('malformed heads and every answer in the OpenAI shape', () => {
  const badRequest = { error: { message: expect.any(String), type: 'invalid_request_error', param: null, code: 'bad_request' } };

  it.each([
    ['garbage bytes', 'hello there, router\r\n\r\n'],
    ['a TLS ClientHello', '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x00\x01\x02'],
    ['an LF-only request', 'GET /v1/models HTTP/1.1\nHost: router\n\n'],
    ['a request without Host', 'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 15\r\n\r\n{"model":"m1"}'],
    ['a chunked request without Host', 'POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['a bad chunk size', 'POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
  ])('answers %s at once with 400 and a body, and closes', async (_what, bytes) => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }]);
    const c = RawClient.to(r);
    c.send(bytes);
    // The head timeout is 66 s: an answer within the default patience is the refusal itself.
    const res = await c.response();
    expect(res.status).toBe(400);
    expect(res.head).toMatch(/\r\ncontent-type: application\/json/i);
    expect(res.json).toEqual(badRequest);
    await c.closed();
    expect(u.hits).toBe(0);
  });

  it("answers Node's own refusals (431, 417) and every path outside the API in the OpenAI shape; health and metrics stay as they are", async () => {
    const u = await upstream();
    const r = await router([{ id: 'a', url: u.url }]);
    const shape = (code: string) => ({ error: { message: expect.any(String), type: 'invalid_request_error', param: null, code } });

    const huge = RawClient.to(r);
    huge.send(`GET /v1/models HTTP/1.1\r\nHost: router\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`);
    const tooLarge = await huge.response();
    expect([tooLarge.status, tooLarge.json]).toEqual([431, shape('request_header_fields_too_large')]);

    const expectation = RawClient.to(r);
    expectation.send('POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}');
    const failed = await expectation.response();
    expect([failed.status, failed.json]).toEqual([417, shape('expectation_failed')]);

    const unknown = await fetch(`${r.url}/no/such/page`);
    expect([unknown.status, unknown.headers.get('content-type'), await unknown.json()]).toEqual([404, 'application/json', shape('unknown_url')]);
    const wrongMethod = await fetch(`${r.url}/healthz`, { method: 'POST' });
    expect([wrongMethod.status, wrongMethod.headers.get('allow'), await wrongMethod.json()]).toEqual([405, 'GET, HEAD', shape('method_not_allowed')]);
    const deleteModels = await fetch(`${r.url}/v1/models`, { method: 'DELETE' });
    expect([deleteModels.status, await deleteModels.json()]).toEqual([405, shape('method_not_allowed')]);

    expect(await (await fetch(`${r.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
    expect(await metricsText(r)).toContain('llmgw_router_requests_total');
  });
});
