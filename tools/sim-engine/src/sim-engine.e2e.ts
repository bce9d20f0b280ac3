import { spawnSync } from 'node:child_process';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkExposition, sampleValue, type Sample } from './prometheus-text.check';
import { freePort, spawnSimEngine, startSimEngine, stopAllSimEngines, waitUntil, type StartedSim } from './sim-engine.harness';

// End to end: the real simulator process, spoken to by the official OpenAI client.

const FAST = ['--prefill-tps', '1e6', '--decode-tps', '5000', '--output-tokens', '16', '--seed', '1'];

afterAll(stopAllSimEngines);

function client(sim: StartedSim, options: { timeout?: number } = {}): OpenAI {
  return new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'x', maxRetries: 0, ...options });
}

async function scrape(sim: StartedSim): Promise<Sample[]> {
  const res = await fetch(`${sim.url}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  const { samples, problems } = checkExposition(text);
  expect(problems).toEqual([]);
  return samples;
}

/** promtool's own check, where installed (CI installs it): vLLM's `:` names are its only complaint. */
function promtoolProblems(text: string): string[] | undefined {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) return undefined;
  return `${r.stdout}${r.stderr}`
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.endsWith("metric names should not contain ':'"));
}

describe('vLLM flavour', () => {
  let sim: StartedSim;
  let openai: OpenAI;
  beforeAll(async () => {
    sim = await startSimEngine(['--engine', 'vllm', '--served-model-name', 'sim-model', '--port', '0', ...FAST]);
    openai = client(sim);
  });

  it('answers chat completions, plain and streamed with a usage chunk', async () => {
    const plain = await openai.chat.completions.create({ model: 'sim-model', messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 5 });
    expect(plain.object).toBe('chat.completion');
    expect(plain.choices[0].message).toMatchObject({ role: 'assistant', content: expect.stringMatching(/\w/) });
    expect(plain.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: 5, total_tokens: plain.usage!.prompt_tokens + 5 });
    expect(plain.choices[0].finish_reason).toBe('length');

    const stream = await openai.chat.completions.create({
      model: 'sim-model',
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Stream please.' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null = null;
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(finish).toBe('stop');
    expect(usage?.completion_tokens).toBeGreaterThanOrEqual(8); // 16 ± 50 %
    expect(content.split(' ')).toHaveLength(usage!.completion_tokens);
  });

  it('answers completions, plain and streamed', async () => {
    const plain = await openai.completions.create({ model: 'sim-model', prompt: 'Once upon a time', max_tokens: 7 });
    expect(plain.choices[0].text.split(' ')).toHaveLength(7);
    expect(plain.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 7, total_tokens: 11 });
    const stream = await openai.completions.create({ model: 'sim-model', prompt: 'Once upon a time', max_tokens: 3, stream: true, stream_options: { include_usage: true } });
    const texts: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.text) texts.push(chunk.choices[0].text);
      if (chunk.usage) usage = chunk.usage;
    }
    expect(texts).toHaveLength(3);
    expect(usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
  });

  it('answers embeddings deterministically and lists the model', async () => {
    const a = await openai.embeddings.create({ model: 'sim-model', input: 'the same input' });
    const b = await openai.embeddings.create({ model: 'sim-model', input: ['the same input', 'different'] });
    expect(a.data[0].embedding).toHaveLength(384);
    expect(b.data[0].embedding).toEqual(a.data[0].embedding);
    expect(b.data[1].embedding).not.toEqual(a.data[0].embedding);
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['sim-model']);
  });

  it('answers an unknown model with an OpenAI-shaped 404 and bad bodies with 400', async () => {
    const err = await openai.chat.completions.create({ model: 'no-such', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as APIError).error).toEqual({ message: 'The model `no-such` does not exist.', type: 'NotFoundError', param: 'model', code: 404 });
    const malformed = await fetch(`${sim.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model": "sim-model",' });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: unknown }).error).toMatchObject({ type: 'BadRequestError', code: 400 });
    const missing = await openai.chat.completions.create({ model: 'sim-model' } as never).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.BadRequestError);
    expect((missing as APIError).param).toBe('messages');
  });

  it('serves valid Prometheus text with counters that moved', async () => {
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(checkExposition(text).problems).toEqual([]);
    const promtool = promtoolProblems(text);
    if (promtool !== undefined) expect(promtool).toEqual([]);
    const samples = await scrape(sim);
    const label = { model_name: 'sim-model' };
    expect(sampleValue(samples, 'vllm:num_requests_running', label)).toBe(0);
    expect(sampleValue(samples, 'vllm:num_requests_waiting', label)).toBe(0);
    expect(sampleValue(samples, 'vllm:kv_cache_usage_perc', label)).toBe(0);
    expect(sampleValue(samples, 'vllm:prompt_tokens_total', label)).toBeGreaterThan(0);
    expect(sampleValue(samples, 'vllm:generation_tokens_total', label)).toBeGreaterThanOrEqual(5 + 8 + 7 + 3);
  });

  it('exits 0 on SIGTERM', async () => {
    expect(await sim.stop('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});

describe('continuous batching', () => {
  it('with --max-running 4 and 10 concurrent slow requests, 6 wait; aborted requests leave the batch', async () => {
    const sim = await startSimEngine(['--served-model-name', 'm', '--port', '0', '--max-running', '4', '--prefill-tps', '1e6', '--decode-tps', '10', '--output-tokens', '1000']);
    const openai = client(sim);
    const aborts = Array.from({ length: 10 }, () => new AbortController());
    const requests = aborts.map((ac, i) =>
      openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `request ${i}` }] }, { signal: ac.signal }).then(
        () => 'answered',
        (err: unknown) => (err instanceof OpenAI.APIUserAbortError ? 'aborted' : `failed: ${String(err)}`),
      ),
    );
    const label = { model_name: 'm' };
    let kvWhileFull = 0;
    await waitUntil(async () => {
      const samples = await scrape(sim);
      kvWhileFull = sampleValue(samples, 'vllm:kv_cache_usage_perc', label) ?? 0;
      return sampleValue(samples, 'vllm:num_requests_waiting', label) === 6 && sampleValue(samples, 'vllm:num_requests_running', label) === 4;
    }, 'vllm:num_requests_waiting 6 and running 4');
    expect(kvWhileFull).toBeGreaterThan(0);
    for (const ac of aborts) ac.abort();
    expect(await Promise.all(requests)).toEqual(Array(10).fill('aborted'));
    await waitUntil(async () => {
      const samples = await scrape(sim);
      return sampleValue(samples, 'vllm:num_requests_waiting', label) === 0 && sampleValue(samples, 'vllm:num_requests_running', label) === 0;
    }, 'the queue to drain after the aborts');
    const samples = await scrape(sim);
    expect(sampleValue(samples, 'vllm:kv_cache_usage_perc', label)).toBe(0);
    expect(sampleValue(samples, 'vllm:request_success_total', { ...label, finished_reason: 'abort' })).toBe(10);
    await sim.stop();
  });
});

describe('prefix cache', () => {
  // ~2,400 shared tokens, then a short distinct question. Prefill at 20k tok/s: ~120 ms uncached.
  const system = `Rules for this conversation. ${'Answer with care, cite the source, and keep it short. '.repeat(240)}`;
  const ask = (openai: OpenAI, question: string) =>
    openai.chat.completions
      .create({ model: 'm', messages: [{ role: 'system', content: system }, { role: 'user', content: question }], max_tokens: 2 })
      .withResponse();

  async function repeatPrefix(cacheFlag: string): Promise<{ firstMs: number; secondMs: number; cached: number | undefined; prompt: number; hits: number | undefined }> {
    const sim = await startSimEngine(['--served-model-name', 'm', '--port', '0', '--prefill-tps', '20000', '--decode-tps', '1e5', cacheFlag]);
    const openai = client(sim);
    const first = await ask(openai, 'What is the first rule?');
    const second = await ask(openai, 'And the second one, please?');
    const hits = sampleValue(await scrape(sim), 'vllm:prefix_cache_hits_total', { model_name: 'm' });
    await sim.stop();
    return {
      firstMs: Number(first.response.headers.get('x-sim-prefill-ms')),
      secondMs: Number(second.response.headers.get('x-sim-prefill-ms')),
      cached: second.data.usage?.prompt_tokens_details?.cached_tokens,
      prompt: second.data.usage!.prompt_tokens,
      hits,
    };
  }

  it('makes a repeated long prefix much cheaper to prefill with the cache on than off', async () => {
    const [on, off] = await Promise.all([repeatPrefix('--prefix-cache'), repeatPrefix('--no-prefix-cache')]);
    expect(on.prompt).toBeGreaterThan(2000);
    // Modelled prefill time (ms) of the second request: only its uncached tail with the cache on.
    expect(off.secondMs).toBeCloseTo((off.prompt / 20000) * 1000, 0);
    expect(on.firstMs).toBeCloseTo(off.firstMs, 0);
    expect(on.secondMs).toBeLessThan(off.secondMs / 10);
    expect(on.cached).toBeGreaterThan(on.prompt - 32);
    expect(on.hits).toBe(on.cached);
    expect(off.cached).toBeUndefined();
  });
});

describe('llama.cpp flavour', () => {
  it('listens at once, answers 503 "Loading model" on /health while loading, then 200 and llamacpp metrics', async () => {
    const sim = await startSimEngine(['--engine', 'llamacpp', '-m', '/models/tiny.gguf', '--alias', 'tiny', '--port', '0', '-c', '4096', '-np', '2', '-ngl', '0', '--metrics', '--kv-metric', '--load-seconds', '2.5', ...FAST]);
    const loading = await fetch(`${sim.url}/health`);
    expect(loading.status).toBe(503);
    expect(await loading.json()).toEqual({ error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
    await waitUntil(async () => (await fetch(`${sim.url}/health`)).status === 200, '/health 200');
    expect(await (await fetch(`${sim.url}/health`)).json()).toEqual({ status: 'ok' });
    expect(sim.stdout()).toContain('sim-engine ready');

    const answer = await client(sim).chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 });
    expect(answer.usage?.completion_tokens).toBe(3);
    const samples = await scrape(sim);
    expect(sampleValue(samples, 'llamacpp:requests_processing')).toBe(0);
    expect(sampleValue(samples, 'llamacpp:requests_deferred')).toBe(0);
    expect(sampleValue(samples, 'llamacpp:kv_cache_usage_ratio')).toBe(0);
    expect(sampleValue(samples, 'llamacpp:tokens_predicted_total')).toBe(3);
    expect(await sim.stop('SIGINT')).toEqual({ code: 0, signal: null });
  });
});

describe('vLLM flavour while loading', () => {
  it('refuses connections until loaded, then answers /health 200 with an empty body', async () => {
    const port = await freePort();
    const sim = spawnSimEngine(['--served-model-name', 'm', '--port', String(port), '--load-seconds', '2']);
    await sim.waitForLine(/^sim-engine loading/);
    const refused = await fetch(`http://127.0.0.1:${port}/health`).catch((e: unknown) => e);
    expect((refused as { cause?: { code?: string } }).cause?.code).toBe('ECONNREFUSED');
    await sim.waitForLine(/^sim-engine listening on http:\/\/127\.0\.0\.1:\d+$/);
    const ok = await fetch(`http://127.0.0.1:${port}/health`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('');
    expect(await sim.stop()).toEqual({ code: 0, signal: null });
  });
});

describe('fault knobs', () => {
  const base = ['--served-model-name', 'm', '--port', '0', ...FAST];
  let errors: StartedSim, crash: StartedSim, hang: StartedSim, midStream: StartedSim;
  beforeAll(async () => {
    [errors, crash, hang, midStream] = await Promise.all([
      startSimEngine([...base, '--error-rate', '0.5', '--seed', '5']),
      startSimEngine([...base, '--crash-after', '2']),
      startSimEngine([...base, '--hang']),
      startSimEngine([...base, '--fail-mid-stream-after', '4', '--output-tokens', '100', '--output-jitter', '0']),
    ]);
  });

  it('--error-rate answers a seeded fraction of requests with OpenAI-shaped 500s', async () => {
    const openai = client(errors);
    const outcomes: string[] = [];
    for (let i = 0; i < 16; i++) {
      outcomes.push(
        await openai.completions.create({ model: 'm', prompt: 'x', max_tokens: 1 }).then(
          () => 'ok',
          (err: unknown) => (err instanceof OpenAI.InternalServerError && (err.error as { type?: string }).type === 'InternalServerError' ? '500' : String(err)),
        ),
      );
    }
    expect(outcomes.filter((o) => o === 'ok').length).toBeGreaterThan(2);
    expect(outcomes.filter((o) => o === '500').length).toBeGreaterThan(2);
    expect(outcomes.every((o) => o === 'ok' || o === '500')).toBe(true);
    expect((await fetch(`${errors.url}/health`)).status).toBe(200);
  });

  it('--crash-after 2 serves one request, then the process dies with exit code 1 during the second', async () => {
    const openai = client(crash);
    await expect(openai.completions.create({ model: 'm', prompt: 'x', max_tokens: 1 })).resolves.toMatchObject({ object: 'text_completion' });
    await expect(openai.completions.create({ model: 'm', prompt: 'x', max_tokens: 1 })).rejects.toBeInstanceOf(OpenAI.APIConnectionError);
    expect(await crash.exited).toEqual({ code: 1, signal: null });
  });

  it('--hang accepts requests and never answers, while /health answers; SIGTERM still exits 0', async () => {
    const err = await client(hang, { timeout: 400 })
      .completions.create({ model: 'm', prompt: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    const held = fetch(`${hang.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: 'x' }) }).catch((e: unknown) => e);
    expect((await fetch(`${hang.url}/health`)).status).toBe(200);
    expect(await hang.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(await held).toBeInstanceOf(Error); // the held connection was dropped, not answered
  });

  it('--fail-mid-stream-after 4 cuts the stream after 4 tokens', async () => {
    const stream = await client(midStream).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true });
    const contents: string[] = [];
    const failure = await (async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) contents.push(chunk.choices[0].delta.content);
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(contents).toHaveLength(4);
  });
});

describe('command line', () => {
  it('exits 2 naming an unknown flag', async () => {
    const sim = spawnSimEngine(['--served-model-name', 'm', '--bogus-flag', '3']);
    expect(await sim.exited).toEqual({ code: 2, signal: null });
    expect(sim.stderr()).toContain('unknown flag --bogus-flag');
  });
});
