import { readFileSync } from 'node:fs';
import { fixturePath } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { parseArgs } from './cli.parser';
import { checkExposition, sampleValue } from './prometheus-text.check';
import { SimEngineServer } from './sim-engine.server';

// In-process tests of the HTTP surface (the e2e file covers the real process).

const running: SimEngineServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

interface Started {
  url: string;
  exits: number[];
  lines: string[];
  server: SimEngineServer;
}

async function start(args: string[]): Promise<Started> {
  const parsed = parseArgs(['--port', '0', ...args]);
  if (parsed.kind !== 'config') throw new Error(JSON.stringify(parsed));
  const exits: number[] = [];
  const lines: string[] = [];
  const server = new SimEngineServer(parsed.config, {
    clock: { now: () => performance.now() },
    wallClock: { now: () => Date.now() },
    announce: (l) => lines.push(l),
    warn: () => undefined,
    exit: (code) => exits.push(code),
  });
  running.push(server);
  const port = await server.start();
  return { url: `http://127.0.0.1:${port}`, exits, lines, server };
}

// Response bodies are checked by assertions, not by types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const FAST = ['--engine', 'vllm', '--served-model-name', 'm', '--prefill-tps', '1e7', '--decode-tps', '1e5', '--output-tokens', '8'];

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Json; headers: Headers }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text), headers: res.headers };
}

/** The data payloads of an SSE body; comment lines (`: ...`) are dropped. */
function sseEvents(text: string): string[] {
  return text
    .split('\n\n')
    .map((e) => e.split('\n').filter((l) => !l.startsWith(':')))
    .filter((lines) => lines.length > 0 && lines.join('') !== '')
    .map((lines) => {
      expect(lines).toHaveLength(1);
      expect(lines[0].startsWith('data: ')).toBe(true);
      return lines[0].slice('data: '.length);
    });
}

async function waitFor(check: () => Promise<boolean>, what: string, deadlineMs = 5000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('streaming shape', () => {
  it('streams chat chunks shaped like the recorded OpenAI stream, then usage and [DONE]', async () => {
    const fixture = sseEvents(readFileSync(fixturePath('openai', 'openai_chat_stream_4cc50a6135d2.sse'), 'utf8'));
    const real = fixture.slice(0, -1).map((e) => JSON.parse(e));
    const { url } = await start(FAST);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true }, max_tokens: 3 }),
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events = sseEvents(await res.text());
    expect(events[events.length - 1]).toBe('[DONE]');
    expect(fixture[fixture.length - 1]).toBe('[DONE]');
    const ours = events.slice(0, -1).map((e) => JSON.parse(e));
    // Same sequence of roles: role chunk, content chunks, finish chunk, usage chunk.
    const kinds = (chunks: Json[]): string[] =>
      chunks.map((c) => (c.choices.length === 0 ? 'usage' : c.choices[0].finish_reason ? 'finish' : 'role' in c.choices[0].delta ? 'role' : 'content'));
    expect(kinds(ours)).toEqual(['role', 'content', 'content', 'content', 'finish', 'usage']);
    expect(kinds(real)).toEqual(['role', 'content', 'finish', 'usage']);
    // Every key the real chunks carry (bar system_fingerprint) is there, at every level.
    const keys = (o: object) => Object.keys(o).filter((k) => k !== 'system_fingerprint').sort();
    for (const [i, kind] of ['role', 'content', 'finish', 'usage'].entries()) {
      const mine = ours[kinds(ours).indexOf(kind)];
      expect(Object.keys(mine)).toEqual(expect.arrayContaining(keys(real[i])));
      if (kind !== 'usage') expect(Object.keys(mine.choices[0])).toEqual(expect.arrayContaining(keys(real[i].choices[0])));
      expect(mine.id).toBe(ours[0].id);
      expect(mine.object).toBe('chat.completion.chunk');
    }
    expect(ours[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(ours[4].choices[0]).toMatchObject({ delta: {}, finish_reason: 'length' });
    expect(ours[5].usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: 3, total_tokens: ours[5].usage.prompt_tokens + 3 });
  });

  it('streams completions as text_completion chunks and omits usage unless asked', async () => {
    const { url } = await start(FAST);
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: 'Once upon', stream: true, max_tokens: 2 }) });
    const events = sseEvents(await res.text());
    expect(events).toHaveLength(4);
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.map((c) => c.object)).toEqual(['text_completion', 'text_completion', 'text_completion']);
    expect(chunks.map((c) => c.choices[0].finish_reason)).toEqual([null, null, 'length']);
    expect(chunks.every((c) => c.usage === undefined)).toBe(true);
  });
});

describe('generation', () => {
  it('answers n choices per prompt with indexes in OpenAI order and summed usage', async () => {
    const { url } = await start(FAST);
    const { status, json } = await post(`${url}/v1/completions`, { model: 'm', prompt: ['alpha beta', [5, 6, 7]], n: 2, max_tokens: 4 });
    expect(status).toBe(200);
    expect(json.choices.map((c: Json) => c.index)).toEqual([0, 1, 2, 3]);
    expect(json.usage).toEqual({ prompt_tokens: 5, completion_tokens: json.choices.length * 4 - countStops(json), total_tokens: json.usage.prompt_tokens + json.usage.completion_tokens, prompt_tokens_details: null });
  });

  function countStops(json: Json): number {
    return json.choices.reduce((sum: number, c: Json) => sum + (c.finish_reason === 'stop' ? 4 - c.text.split(' ').length : 0), 0);
  }

  it('honours max_tokens, ends naturally with stop, and reproduces output for a request seed', async () => {
    const { url } = await start([...FAST, '--output-tokens', '10', '--output-jitter', '0']);
    const capped = await post(`${url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 3 });
    expect(capped.json.choices[0].finish_reason).toBe('length');
    expect(capped.json.usage.completion_tokens).toBe(3);
    const natural = await post(`${url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 50 });
    expect(natural.json.choices[0].finish_reason).toBe('stop');
    expect(natural.json.usage.completion_tokens).toBe(10);
    const ignoreEos = await post(`${url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 25, ignore_eos: true });
    expect(ignoreEos.json.usage.completion_tokens).toBe(25);
    const seeded = { model: 'm', messages: [{ role: 'user', content: 'tell me' }], seed: 42 };
    const [a, b] = [await post(`${url}/v1/chat/completions`, seeded), await post(`${url}/v1/chat/completions`, seeded)];
    expect(a.json.choices[0].message.content).toBe(b.json.choices[0].message.content);
    expect(a.json.id).not.toBe(b.json.id);
  });

  it('reports modelled durations in x-sim-* headers', async () => {
    const { url } = await start(['--served-model-name', 'm', '--prefill-tps', '1e5', '--decode-tps', '1e4', '--output-tokens', '5', '--output-jitter', '0']);
    const { headers, json } = await post(`${url}/v1/completions`, { model: 'm', prompt: 'word '.repeat(200) });
    expect(json.usage.prompt_tokens).toBe(200);
    expect(Number(headers.get('x-sim-prefill-ms'))).toBeCloseTo(2, 1); // 200 tokens at 100k tok/s
    expect(Number(headers.get('x-sim-decode-ms'))).toBeCloseTo(0.4, 1); // 4 more tokens at 10k tok/s
    expect(headers.get('x-sim-cached-tokens')).toBe('0');
  });

  it('aborts the sequences of a client that goes away', async () => {
    const { url } = await start(['--served-model-name', 'm', '--decode-tps', '20', '--output-tokens', '100']);
    const ac = new AbortController();
    const pending = fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: 'x', stream: true }), signal: ac.signal });
    const res = await pending;
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await waitFor(async () => {
      const { samples } = checkExposition(await (await fetch(`${url}/metrics`)).text());
      return sampleValue(samples, 'vllm:num_requests_running', { model_name: 'm' }) === 0 && sampleValue(samples, 'vllm:request_success_total', { finished_reason: 'abort' }) === 1;
    }, 'the aborted request to leave the batch');
  });
});

describe('embeddings and models', () => {
  it('returns deterministic unit vectors, as floats or base64 float32', async () => {
    const { url } = await start([...FAST, '--embedding-dim', '16']);
    const f = await post(`${url}/v1/embeddings`, { model: 'm', input: ['same text', 'other words'] });
    const again = await post(`${url}/v1/embeddings`, { model: 'm', input: 'same text', encoding_format: 'base64' });
    expect(f.status).toBe(200);
    expect(f.json).toMatchObject({ object: 'list', model: 'm', usage: { prompt_tokens: 4, total_tokens: 4 } });
    const v0: number[] = f.json.data[0].embedding;
    expect(v0).toHaveLength(16);
    expect(Math.hypot(...v0)).toBeCloseTo(1, 5);
    const decoded = Array.from(new Float32Array(new Uint8Array(Buffer.from(again.json.data[0].embedding, 'base64')).buffer));
    expect(decoded).toEqual(v0);
    expect(f.json.data[1].embedding).not.toEqual(v0);
    const small = await post(`${url}/v1/embeddings`, { model: 'm', input: 'same text', dimensions: 4 });
    expect(small.json.data[0].embedding).toHaveLength(4);
  });

  it('lists every served name in /v1/models', async () => {
    const { url } = await start(['serve', '/models/base', '--served-model-name', 'a', 'b']);
    const json = await (await fetch(`${url}/v1/models`)).json();
    expect(json).toMatchObject({ object: 'list', data: [{ id: 'a', object: 'model', owned_by: 'vllm', root: '/models/base', max_model_len: 32768 }, { id: 'b' }] });
  });
});

describe('errors', () => {
  const chat = (over: object) => ({ model: 'm', messages: [{ role: 'user', content: 'x' }], ...over });
  it.each([
    ['/v1/chat/completions', '{"model":', 400, null, 'Invalid JSON'],
    ['/v1/chat/completions', '[1]', 400, null, 'JSON object'],
    ['/v1/chat/completions', { model: 'm' }, 400, 'messages', 'messages'],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] }, 400, 'model', 'model'],
    ['/v1/chat/completions', chat({ model: 'nope' }), 404, 'model', 'The model `nope` does not exist.'],
    ['/v1/chat/completions', chat({ max_tokens: 0 }), 400, 'max_tokens', 'max_tokens'],
    ['/v1/chat/completions', chat({ stream_options: { include_usage: true } }), 400, 'stream_options', 'stream=True'],
    ['/v1/chat/completions', chat({ messages: [{ content: 'x' }] }), 400, 'messages[0].role', 'role'],
    ['/v1/chat/completions', chat({ max_tokens: 40_000 }), 400, null, 'maximum context length is 32768 tokens'],
    ['/v1/completions', { model: 'm', prompt: '' }, 400, 'prompt', 'empty'],
    ['/v1/completions', { model: 'm', prompt: [1, 'a'] }, 400, 'prompt[0]', 'prompt[0]'],
    ['/v1/completions', { model: 'm', prompt: Array(600).fill('a'), n: 2 }, 400, 'prompt', 'at most 1024'],
    ['/v1/embeddings', { model: 'm' }, 400, 'input', 'input'],
    ['/v1/embeddings', { model: 'm', input: 'x', encoding_format: 'hex' }, 400, 'encoding_format', 'encoding_format'],
  ])('%s %j → %i', async (path, body, status, param, message) => {
    const { url } = await start(FAST);
    const res = await post(`${url}${path}`, body);
    expect(res.status).toBe(status);
    expect(Object.keys(res.json.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(res.json.error).toMatchObject({ param, code: status, type: status === 404 ? 'NotFoundError' : 'BadRequestError' });
    expect(res.json.error.message).toContain(message);
  });

  it('answers unknown paths 404, wrong methods 405, and a missing API key 401', async () => {
    const { url } = await start([...FAST, '--api-key', 'sekret']);
    expect((await fetch(`${url}/v2/nothing`)).status).toBe(404);
    const wrong = await fetch(`${url}/v1/chat/completions`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await post(`${url}/v1/chat/completions`, chat({}))).status).toBe(401);
    expect((await post(`${url}/v1/chat/completions`, chat({}), { authorization: 'Bearer sekret' })).status).toBe(200);
    expect((await fetch(`${url}/health`)).status).toBe(200); // health and metrics stay open
  });
});

describe('llama.cpp flavour', () => {
  it('answers 503 Loading model until loaded, then 200 {"status":"ok"}; /metrics only with --metrics', async () => {
    const { url, lines } = await start(['--engine', 'llamacpp', '--alias', 'tiny', '--load-seconds', '0.3']);
    const loading = await fetch(`${url}/health`);
    expect(loading.status).toBe(503);
    expect(await loading.json()).toEqual({ error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
    expect((await post(`${url}/v1/completions`, { model: 'tiny', prompt: 'x' })).status).toBe(503);
    await waitFor(async () => (await fetch(`${url}/health`)).status === 200, 'health 200');
    expect(await (await fetch(`${url}/health`)).json()).toEqual({ status: 'ok' });
    expect(lines).toEqual([expect.stringContaining('loading'), expect.stringMatching(/^sim-engine listening on http:\/\/127\.0\.0\.1:\d+$/), 'sim-engine ready']);
    const metrics = await fetch(`${url}/metrics`);
    expect(metrics.status).toBe(501);
    const missing = await post(`${url}/v1/chat/completions`, { model: 'other', messages: [] });
    expect(missing.json.error).toMatchObject({ type: 'invalid_request_error', code: 400 });
    const ok = await post(`${url}/v1/chat/completions`, { model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    expect(ok.json.timings).toMatchObject({ prompt_n: expect.any(Number), predicted_n: 2 });
  });
});

describe('llama.cpp /slots', () => {
  const LLAMA = ['--engine', 'llamacpp', '--alias', 'tiny', '-np', '3', '-c', '3072', '--decode-tps', '20', '--output-tokens', '100'];

  it('lists the -np slots and marks the busy ones', async () => {
    const { url } = await start(LLAMA);
    await waitFor(async () => (await fetch(`${url}/health`)).status === 200, 'ready');
    const idle = await fetch(`${url}/slots`);
    expect(idle.status).toBe(200);
    expect(idle.headers.get('content-type')).toBe('application/json');
    expect(await idle.json()).toEqual([0, 1, 2].map((id) => ({ id, n_ctx: 1024, speculative: false, is_processing: false })));

    const ac = new AbortController();
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'tiny', prompt: 'x', stream: true }), signal: ac.signal });
    await res.body!.getReader().read();
    const busy: Json = await (await fetch(`${url}/slots`)).json();
    expect(busy.map((s: Json) => s.is_processing)).toEqual([true, false, false]);
    ac.abort();
    await waitFor(async () => ((await (await fetch(`${url}/slots`)).json()) as Json[]).every((s) => !s.is_processing), 'the slot freed');
  });

  it('answers 501 as llama-server does when started with --no-slots', async () => {
    const { url } = await start([...LLAMA, '--no-slots']);
    await waitFor(async () => (await fetch(`${url}/health`)).status === 200, 'ready');
    const res = await fetch(`${url}/slots`);
    expect(res.status).toBe(501);
    expect(((await res.json()) as Json).error).toMatchObject({ code: 501, type: 'not_supported_error', message: 'This server does not support slots endpoint. Start it with `--slots`' });
  });

  it('answers 503 Loading model while loading, and vLLM has no /slots (404)', async () => {
    const llama = await start([...LLAMA, '--load-seconds', '30']);
    expect((await fetch(`${llama.url}/slots`)).status).toBe(503);
    const vllm = await start(FAST);
    expect((await fetch(`${vllm.url}/slots`)).status).toBe(404);
  });
});

describe('fault knobs', () => {
  const req = { model: 'm', prompt: 'x', max_tokens: 2 };

  it('--crash-after N exits with 1 once the Nth request starts', async () => {
    const { url, exits } = await start([...FAST, '--crash-after', '2']);
    expect((await post(`${url}/v1/completions`, req)).status).toBe(200);
    expect(exits).toEqual([]);
    void fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify(req) }).catch(() => undefined);
    await waitFor(async () => exits.length > 0, 'exit');
    expect(exits).toEqual([1]);
  });

  it('--error-rate fails that fraction with OpenAI-shaped 500s, the same ones for the same seed', async () => {
    const pattern = async (): Promise<number[]> => {
      const { url, server } = await start([...FAST, '--error-rate', '0.5', '--seed', '3']);
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await post(`${url}/v1/completions`, req)).status);
      await server.close();
      return statuses;
    };
    const first = await pattern();
    expect(first.filter((s) => s === 500).length).toBeGreaterThan(2);
    expect(first.filter((s) => s === 200).length).toBeGreaterThan(2);
    expect(await pattern()).toEqual(first);
    const { url } = await start([...FAST, '--error-rate', '1']);
    const failed = await post(`${url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'x' }] });
    expect(failed).toMatchObject({ status: 500, json: { error: { type: 'InternalServerError', code: 500, param: null } } });
  });

  it('--fail-mid-stream-after N destroys the connection after N tokens', async () => {
    const { url } = await start([...FAST, '--fail-mid-stream-after', '3', '--output-tokens', '50', '--output-jitter', '0']);
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }) });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let received = '';
    let failure: unknown;
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) received += Buffer.from(r.value).toString('utf8');
    } catch (err) {
      failure = err;
    }
    expect(failure).toBeDefined(); // the body ended without its terminating chunk
    const events = sseEvents(received);
    expect(events.map((e) => JSON.parse(e).choices[0].delta)).toEqual([{ role: 'assistant', content: '' }, { content: expect.any(String) }, { content: expect.any(String) }, { content: expect.any(String) }]);
  });

  it('--fail-before-content sends the head and the role-only chunk, then drops the connection', async () => {
    const { url } = await start([...FAST, '--fail-before-content']);
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }) });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    let received = '';
    let failure: unknown;
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) received += Buffer.from(r.value).toString('utf8');
    } catch (err) {
      failure = err;
    }
    expect(failure).toBeDefined();
    expect(sseEvents(received).map((e) => JSON.parse(e).choices[0].delta)).toEqual([{ role: 'assistant', content: '' }]);
  });
});
