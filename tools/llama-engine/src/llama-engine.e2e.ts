import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePrometheusText } from '@llmgw/metrics-mappings';
import { processExists, runTsEntry, spawnProcess, stopAllSpawned, waitFor, type SpawnedProcess } from '@llmgw/testing';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The real engine as a process (node-llama-cpp on one CPU thread) serving the generated tiny
// model. Its output is gibberish; the tests check shapes, counts, determinism and lifecycle.

const dir = mkdtempSync(join(tmpdir(), 'llmgw-llama-engine-'));
const MODEL = join(dir, 'tiny.gguf');
/** Cut inside the tensor data: node-llama-cpp reports "Failed to load model". */
const TRUNCATED = join(dir, 'truncated.gguf');
/** `llama.attention.head_count = 0`: llama.cpp hits a GGML_ASSERT and aborts the process. */
const ABORTING = join(dir, 'head-count-zero.gguf');

/** The bytes of `model` with the u32 value of metadata key `key` replaced by `value`. */
function patchU32(model: Buffer, key: string, value: number): Buffer {
  const out = Buffer.from(model);
  const name = Buffer.from(key);
  // A GGUF key is a u64 length, the name, a u32 type (4 = u32), then the value. Skip longer
  // keys that merely start with `key` (head_count_kv).
  let at = out.indexOf(name);
  while (at >= 0 && out[at + name.length] !== 4) at = out.indexOf(name, at + 1);
  if (at < 0) throw new Error(`no u32 key ${key}`);
  out.writeUInt32LE(value, at + name.length + 4);
  return out;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

beforeAll(() => {
  // tools/gguf writes the model (buildTinyModel); run as its CLI since projects import each other only through @llmgw/*.
  const { command, args } = runTsEntry('tools/gguf/src/main.ts', [MODEL]);
  execFileSync(command, args, { stdio: 'ignore', timeout: 60_000 });
  const model = readFileSync(MODEL);
  writeFileSync(TRUNCATED, model.subarray(0, Math.floor(model.length / 2)));
  writeFileSync(ABORTING, patchU32(model, 'llama.attention.head_count', 0));
});

afterAll(async () => {
  await stopAllSpawned();
  rmSync(dir, { recursive: true, force: true });
});

interface Engine {
  proc: SpawnedProcess;
  base: string;
}

async function startEngine(model: string, ...flags: string[]): Promise<Engine> {
  const { command, args } = runTsEntry('tools/llama-engine/src/main.ts', ['-m', model, '--host', '127.0.0.1', '--port', '0', ...flags]);
  const proc = await spawnProcess({
    command,
    args,
    readyWhen: { stdoutMatch: /^llama-engine listening on (http:\/\/127\.0\.0\.1:\d+)$/m },
    deadlineMs: 60_000,
    name: 'llama-engine',
  });
  return { proc, base: proc.readyMatch?.[1] ?? '' };
}

function workerPid(proc: SpawnedProcess): number {
  const pid = Number(proc.stderr.match(/model worker started \(pid (\d+)\)/)?.[1]);
  if (!(pid > 0)) throw new Error(`no worker pid in the engine's log${proc.describeOutput()}`);
  return pid;
}

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

async function waitReady(base: string): Promise<void> {
  await waitFor(async () => (await fetch(`${base}/health`)).status === 200, { deadlineMs: 60_000, intervalMs: 50, message: `${base}/health never answered 200` });
}

async function metrics(base: string): Promise<Map<string, { type: string; value: number }>> {
  const res = await fetch(`${base}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const families = parsePrometheusText(await res.text());
  return new Map(families.map((f) => [f.name, { type: f.type, value: f.samples[0].value }]));
}

async function post(base: string, path: string, body: string): Promise<{ status: number; body: { error?: Record<string, unknown> } }> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, body: (await res.json()) as { error?: Record<string, unknown> } };
}

describe('llama-engine serving the tiny model (-np 2 -c 2048 --metrics --alias tiny)', () => {
  let engine: Engine;
  let client: OpenAI;

  /** What the engine answered right after it started listening, while the worker was still loading. */
  let whileLoading: { health: { status: number; body: unknown }; chat: number };

  beforeAll(async () => {
    engine = await startEngine(MODEL, '-np', '2', '-c', '2048', '--metrics', '--alias', 'tiny', '--debug-load-delay-ms', '1500');
    client = new OpenAI({ baseURL: `${engine.base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });
    whileLoading = {
      health: await getJson(`${engine.base}/health`),
      chat: (await post(engine.base, '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }))).status,
    };
    await waitReady(engine.base);
  }, 90_000);

  it('answers /health 503 "Loading model" while the worker loads, then 200', async () => {
    expect(whileLoading).toEqual({ health: { status: 503, body: { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } } }, chat: 503 });
    expect(await getJson(`${engine.base}/health`)).toEqual({ status: 200, body: { status: 'ok' } });
  });

  it('lists the alias in /v1/models', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['tiny']);
    expect(models.data[0]).toMatchObject({ object: 'model', owned_by: 'llamacpp', meta: { n_ctx_train: 2048, n_ctx_slot: 1024 } });
  });

  it('gives the openai client a chat completion with usage, deterministic at temperature 0', async () => {
    const ask = () => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 16, temperature: 0 });
    const first = await ask();
    expect(first.object).toBe('chat.completion');
    expect(first.model).toBe('tiny');
    expect(first.id).toMatch(/^chatcmpl-/);
    expect(first.choices).toHaveLength(1);
    expect(first.choices[0]).toMatchObject({ index: 0, finish_reason: 'length', message: { role: 'assistant' } });
    expect(typeof first.choices[0].message.content).toBe('string');
    expect(first.usage?.completion_tokens).toBe(16);
    expect(first.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(first.usage?.total_tokens).toBe((first.usage?.prompt_tokens ?? 0) + 16);
    expect((await ask()).choices[0].message.content).toBe(first.choices[0].message.content);
  });

  it('streams a chat completion whose text equals the non-streamed one, with usage when asked', async () => {
    const messages = [{ role: 'user' as const, content: 'Stream me' }];
    const whole = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 24, temperature: 0 });
    const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = '';
    const finishes: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined | null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object).toBe('chat.completion.chunk');
      for (const choice of chunk.choices) {
        text += choice.delta.content ?? '';
        if (choice.finish_reason) finishes.push(choice.finish_reason);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe(whole.choices[0].message.content);
    expect(finishes).toEqual(['length']);
    expect(usage).toEqual({ prompt_tokens: whole.usage?.prompt_tokens, completion_tokens: 24, total_tokens: (whole.usage?.prompt_tokens ?? 0) + 24 });

    const withoutUsage = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 4, stream: true });
    for await (const chunk of withoutUsage) expect(chunk.usage ?? undefined).toBeUndefined();
  });

  it('gives the openai client a completion, streamed or not, and cuts the text at a stop string', async () => {
    const prompt = 'Once upon a time';
    const whole = await client.completions.create({ model: 'tiny', prompt, max_tokens: 12, temperature: 0 });
    expect(whole.object).toBe('text_completion');
    expect(whole.choices[0]).toMatchObject({ index: 0, finish_reason: 'length' });
    expect(whole.usage).toMatchObject({ completion_tokens: 12 });
    const text = whole.choices[0].text;

    let streamed = '';
    for await (const chunk of await client.completions.create({ model: 'tiny', prompt, max_tokens: 12, temperature: 0, stream: true })) {
      streamed += chunk.choices[0]?.text ?? '';
    }
    expect(streamed).toBe(text);

    // A stop string taken from the greedy text ends the same generation right before it.
    const stop = text.slice(2, 4);
    expect(stop.length).toBe(2);
    const cut = await client.completions.create({ model: 'tiny', prompt, max_tokens: 12, temperature: 0, stop: [stop] });
    expect(cut.choices[0]).toMatchObject({ text: text.slice(0, text.indexOf(stop)), finish_reason: 'stop' });
  });

  it('is repeatable for a seed at high temperature and keeps random bytes valid JSON text', async () => {
    const body = { model: 'tiny', prompt: 'x', max_tokens: 200, temperature: 2, top_k: 0, top_p: 1, min_p: 0, seed: 1234 };
    const a = await client.completions.create(body);
    const b = await client.completions.create(body);
    expect(a.choices[0].text).toBe(b.choices[0].text);
    expect(a.choices[0].text).not.toMatch(LONE_SURROGATE);
    const other = await client.completions.create({ ...body, seed: 99 });
    expect(other.choices[0].text).not.toBe(a.choices[0].text);
  });

  it('answers OpenAI-shaped errors: malformed JSON, missing messages, unknown route', async () => {
    const malformed = await post(engine.base, '/v1/chat/completions', '{"messages": [');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ code: 400, type: 'invalid_request_error' });
    expect(String(malformed.body.error?.message)).toMatch(/malformed JSON/);

    const missing = await post(engine.base, '/v1/chat/completions', '{"model":"tiny"}');
    expect(missing).toMatchObject({ status: 400, body: { error: { type: 'invalid_request_error', param: 'messages' } } });

    const badTemperature = await post(engine.base, '/v1/completions', '{"prompt":"a","temperature":-1}');
    expect(badTemperature).toMatchObject({ status: 400, body: { error: { param: 'temperature' } } });

    const tooLong = await post(engine.base, '/v1/completions', JSON.stringify({ prompt: 'a'.repeat(1500), max_tokens: 1 }));
    expect(tooLong).toMatchObject({ status: 400, body: { error: { type: 'exceed_context_size_error' } } });

    const unknown = await getJson(`${engine.base}/v1/nothing`);
    expect(unknown).toMatchObject({ status: 404, body: { error: { code: 404, type: 'not_found_error' } } });
    await expect(client.chat.completions.create({ model: 'tiny', messages: [] })).rejects.toMatchObject({ status: 400 });
  });

  it('serves llama-server /metrics names as valid Prometheus text, counting the requests served', async () => {
    const m = await metrics(engine.base);
    const expected: Record<string, string> = {
      'llamacpp:prompt_tokens_total': 'counter',
      'llamacpp:prompt_seconds_total': 'counter',
      'llamacpp:tokens_predicted_total': 'counter',
      'llamacpp:tokens_predicted_seconds_total': 'counter',
      'llamacpp:n_decode_total': 'counter',
      'llamacpp:n_tokens_max': 'counter',
      'llamacpp:prompt_tokens_seconds': 'gauge',
      'llamacpp:predicted_tokens_seconds': 'gauge',
      'llamacpp:requests_processing': 'gauge',
      'llamacpp:requests_deferred': 'gauge',
      'llamacpp:n_busy_slots_per_decode': 'gauge',
      'llamacpp:kv_cache_usage_ratio': 'gauge',
      'llamacpp:kv_cache_tokens': 'gauge',
    };
    for (const [name, type] of Object.entries(expected)) expect(m.get(name)?.type, name).toBe(type);
    const before = m.get('llamacpp:tokens_predicted_total')?.value ?? 0;
    await client.completions.create({ model: 'tiny', prompt: 'count me', max_tokens: 7, temperature: 0 });
    const after = await metrics(engine.base);
    expect(after.get('llamacpp:tokens_predicted_total')?.value).toBe(before + 7);
    expect(after.get('llamacpp:prompt_tokens_total')?.value).toBeGreaterThan(m.get('llamacpp:prompt_tokens_total')?.value ?? 0);
    expect(after.get('llamacpp:requests_processing')?.value).toBe(0);
  });

  it('runs two requests at once, defers the rest FIFO, and frees slots when clients disconnect', async () => {
    const before = (await metrics(engine.base)).get('llamacpp:tokens_predicted_total')?.value ?? 0;
    // Greedy decoding of these prompts never emits end-of-generation (checked: each fills its
    // slot's 1024-token context), so unless cancelled four of them make ~4 x 970 tokens.
    const aborts = Array.from({ length: 4 }, () => new AbortController());
    const streams = aborts.map((abort, i) =>
      fetch(`${engine.base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: `load ${i}` }], max_tokens: 5000, temperature: 0, stream: true }),
        signal: abort.signal,
      }).then(
        async (res) => {
          await res.body?.pipeTo(new WritableStream());
        },
        () => undefined,
      ),
    );
    const busy = await waitFor(
      async () => {
        const m = await metrics(engine.base);
        const seen = { processing: m.get('llamacpp:requests_processing')?.value, deferred: m.get('llamacpp:requests_deferred')?.value };
        return seen.processing === 2 && (seen.deferred ?? 0) >= 1 ? seen : undefined;
      },
      { deadlineMs: 20_000, intervalMs: 20, message: 'requests_processing 2 with requests_deferred >= 1' },
    );
    expect(busy.deferred).toBeLessThanOrEqual(2);

    const slots = (await getJson(`${engine.base}/slots`)).body as Array<Record<string, unknown>>;
    expect(slots).toHaveLength(2);
    for (const [i, slot] of slots.entries()) {
      expect(slot).toMatchObject({ id: i, n_ctx: 1024, is_processing: true, next_token: { has_next_token: true } });
      expect(slot.id_task).toEqual(expect.any(Number));
    }

    for (const abort of aborts) abort.abort();
    await Promise.allSettled(streams);
    const idle = await waitFor(
      async () => {
        const m = await metrics(engine.base);
        return m.get('llamacpp:requests_processing')?.value === 0 && m.get('llamacpp:requests_deferred')?.value === 0 ? m : undefined;
      },
      { deadlineMs: 10_000, intervalMs: 20, message: 'slots freed after the clients left' },
    );
    // Cancelled, not run to the end: a single uncancelled run alone makes ~967 tokens.
    expect((idle.get('llamacpp:tokens_predicted_total')?.value ?? 0) - before).toBeLessThan(900);
    const idleSlots = (await getJson(`${engine.base}/slots`)).body as Array<Record<string, unknown>>;
    expect(idleSlots.map((s) => s.is_processing)).toEqual([false, false]);
    const after = await client.completions.create({ model: 'tiny', prompt: 'still here', max_tokens: 3 });
    expect(after.usage?.completion_tokens).toBe(3);
  }, 60_000);

  it('exits 0 without an error on Ctrl-C (SIGINT to the whole process group, worker included)', async () => {
    const worker = workerPid(engine.proc);
    engine.proc.signal('SIGINT');
    expect(await engine.proc.waitForExit(10_000)).toEqual({ code: 0, signal: null });
    expect(engine.proc.stderr).not.toMatch(/error:/);
    await waitFor(() => !processExists(worker), { deadlineMs: 5_000, message: `worker ${worker} still running` });
  }, 30_000);
});

// Each case starts its own engine; they run at once to keep the file quick.
describe.concurrent('llama-engine failures and shutdown', () => {
  it('reports a truncated model on /health (500) and exits non-zero', async ({ expect }) => {
    const { proc, base } = await startEngine(TRUNCATED);
    const health = await waitFor(
      async () => {
        const r = await getJson(`${base}/health`);
        return r.status === 500 ? r : undefined;
      },
      { deadlineMs: 60_000, intervalMs: 20, message: '/health 500 for a truncated model' },
    );
    expect(health.body).toMatchObject({ error: { code: 500, type: 'server_error', message: expect.stringMatching(/^Loading model failed: .*Failed to load model/) } });
    expect((await proc.waitForExit(10_000)).code).toBe(1);
    expect(proc.stderr).toMatch(/Loading model failed/);
  }, 120_000);

  it('survives llama.cpp aborting on a malformed model: the worker dies, the engine reports it and exits non-zero', async ({ expect }) => {
    const { proc, base } = await startEngine(ABORTING);
    const worker = workerPid(proc);
    const health = await waitFor(
      async () => {
        const r = await getJson(`${base}/health`);
        return r.status === 500 ? r : undefined;
      },
      { deadlineMs: 60_000, intervalMs: 20, message: '/health 500 for a model that aborts llama.cpp' },
    );
    expect(health.body).toMatchObject({ error: { message: expect.stringMatching(/model worker exited \(signal SIGABRT\)/) } });
    expect((await proc.waitForExit(10_000)).code).toBe(1);
    expect(processExists(worker)).toBe(false);
  }, 120_000);

  it('exits non-zero when the worker dies after loading, ending the stream in flight with an error', async ({ expect }) => {
    const { proc, base } = await startEngine(MODEL);
    await waitReady(base);
    const res = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'doomed', max_tokens: 5000, temperature: 0, stream: true }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toMatch(/^data: /);
    process.kill(workerPid(proc), 'SIGKILL');
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toMatch(/data: \{"error":\{"code":500,.*model worker exited \(signal SIGKILL\)/);
    expect(rest).not.toContain('[DONE]');
    expect((await proc.waitForExit(10_000)).code).toBe(1);
  }, 120_000);

  it('refuses unknown flags with exit code 2', async ({ expect }) => {
    const { command, args } = runTsEntry('tools/llama-engine/src/main.ts', ['-m', MODEL, '--flash-attn-bogus']);
    const proc = await spawnProcess({ command, args, name: 'llama-engine (bad flag)' });
    expect((await proc.waitForExit(20_000)).code).toBe(2);
    expect(proc.stderr).toMatch(/unknown flag --flash-attn-bogus/);
  }, 60_000);

  it('on SIGTERM stops serving, ends its worker and exits 0; /metrics is 501 without --metrics', async ({ expect }) => {
    const { proc, base } = await startEngine(MODEL);
    const worker = workerPid(proc);
    await waitReady(base);
    expect(await getJson(`${base}/metrics`)).toMatchObject({ status: 501, body: { error: { code: 501, type: 'not_supported_error' } } });
    // Wait for the first event, so the stream's head is out: before that the engine answers a plain JSON 503.
    const res = await fetch(`${base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'interrupted', max_tokens: 5000, temperature: 0, stream: true }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toMatch(/^data: /);
    const inFlight = (async () => {
      let rest = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return rest;
        rest += new TextDecoder().decode(value);
      }
    })().catch((error: unknown) => `failed: ${String(error)}`);
    const started = performance.now();
    process.kill(proc.pid, 'SIGTERM'); // the engine alone, not its process group
    expect(await proc.waitForExit(10_000)).toEqual({ code: 0, signal: null });
    expect(performance.now() - started).toBeLessThan(5_000);
    // The stream in flight ends with an SSE error event rather than a silent cut.
    expect(await inFlight).toMatch(/data: \{"error":\{"code":503,"message":"the engine is shutting down"/);
    await waitFor(() => !processExists(worker), { deadlineMs: 5_000, message: `worker ${worker} still running` });
    await expect(fetch(`${base}/health`)).rejects.toThrow();
  }, 120_000);
});
