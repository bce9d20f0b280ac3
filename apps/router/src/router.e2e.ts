// llmgw-router as a real process in static mode (no controller) in front of two sim-engine
// replicas, driven by the official openai client: every API, streamed and not, aliases,
// API keys, /metrics through promtool, and a clean exit.
import { get } from 'node:http';
import OpenAI from 'openai';
import { inheritedTestEnv, promtoolCheckMetrics, runTsEntry, spawnProcess, stopAllSpawned } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimEngine, tempDir, writeRouterConfig, type SimEngine } from './test/router.harness';
import type { SpawnedProcess } from '@llmgw/testing';

const KEY = 'sk-llmgw-e2e-0123456789abcdef';
let router: SpawnedProcess;
let base = '';
let client: OpenAI;
let replicas: SimEngine[] = [];

beforeAll(async () => {
  const engine = ['--engine', 'vllm', '--served-model-name', 'tiny-chat', 'tiny', '--decode-tps', '2000', '--output-tokens', '8', '--embedding-dim', '16'];
  replicas = await Promise.all([startSimEngine([...engine, '--seed', '1'], 'sim-a'), startSimEngine([...engine, '--seed', '2'], 'sim-b')]);
  const dir = tempDir();
  const config = writeRouterConfig(dir, {
    models: [{ name: 'tiny-chat', aliases: ['tiny'], engine: 'vllm' }],
    endpoints: replicas.map((r, i) => ({ id: `replica-${i}`, model: 'tiny-chat', url: r.url })),
  });
  const keys = writeRouterConfig(dir, { keys: [{ name: 'e2e', key: KEY }] });
  const env = inheritedTestEnv();
  router = await spawnProcess({
    ...runTsEntry('apps/router/src/main.ts'),
    name: 'llmgw-router',
    cleanEnv: true,
    env: { ...env, LLMGW_ROUTER_PORT: '0', LLMGW_DATA_DIR: dir, LLMGW_ROUTER_CONFIG_FILE: config, LLMGW_ROUTER_API_KEYS_FILE: keys, LLMGW_ROUTER_SCRAPE_INTERVAL: '200ms' },
    readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 60_000,
  });
  base = router.readyMatch?.[1] ?? '';
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await stopAllSpawned();
});

describe('llmgw-router in front of sim-engine replicas, through the official openai client', () => {
  it('lists models with their aliases and retrieves one by alias', async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toEqual(['tiny-chat', 'tiny']);
    expect((await client.models.retrieve('tiny')).id).toBe('tiny');
    await expect(client.models.retrieve('missing')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('answers chat completions, streamed and not', async () => {
    const plain = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'hello' }] });
    expect(plain.object).toBe('chat.completion');
    expect(plain.choices[0].message.content?.length).toBeGreaterThan(0);
    expect(plain.usage?.completion_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(finish).not.toBeNull();
    expect(usage).toMatchObject({ completion_tokens: expect.any(Number) });
  });

  it('answers completions, streamed and not', async () => {
    const plain = await client.completions.create({ model: 'tiny-chat', prompt: 'Once upon a time', max_tokens: 5 });
    expect(plain.object).toBe('text_completion');
    expect(plain.choices[0].text.length).toBeGreaterThan(0);
    const stream = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 5, stream: true });
    let pieces = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.text) pieces++;
    expect(pieces).toBeGreaterThan(0);
  });

  it('answers embeddings', async () => {
    const res = await client.embeddings.create({ model: 'tiny-chat', input: ['one', 'two'] });
    expect(res.data).toHaveLength(2);
    expect(res.data[0].embedding).toHaveLength(16);
  });

  it('refuses a wrong key and an unknown model in the OpenAI shape', async () => {
    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-not-a-key-0000000000', maxRetries: 0 });
    await expect(wrong.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
      param: 'model',
    });
  });

  it('exports at least 22 router metric families on /metrics, and promtool accepts them', async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const families = new Set([...text.matchAll(/^# TYPE (llmgw_router_\w+) /gm)].map((m) => m[1]));
    expect(families.size).toBeGreaterThanOrEqual(22);
    expect(text).toMatch(/llmgw_router_requests_total\{route="chat",model="tiny-chat",status="200"\} [1-9]/);
    expect(text).toMatch(/llmgw_router_engine_load\{endpoint="replica-0",field="running"\} \d/);
    expect(promtoolCheckMetrics(text)).toEqual({ status: 0, output: '' });
  });

  it("serves the official client's API traffic on its own HTTP/1.1 front end, giving only /metrics to Node's server", async () => {
    // Each /metrics read below is its own connection, and each is handed over once; the API calls between are not.
    const handovers = async (): Promise<number> => {
      const text = await new Promise<string>((resolve, reject) => {
        get(`${base}/metrics`, { agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => resolve(body));
        }).on('error', reject);
      });
      return Number(/^llmgw_router_http_handovers_total (\d+)$/m.exec(text)?.[1]);
    };
    const before = await handovers();
    expect(before).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 3; i++) await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: `hi ${i}` }] });
    const stream = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], stream: true });
    for await (const chunk of stream) expect(chunk.object).toBe('chat.completion.chunk');
    await client.embeddings.create({ model: 'tiny-chat', input: 'one' });
    await client.models.list();
    expect(await handovers()).toBe(before + 1);
  });

  it('is ready at once in static mode and exits 0 on SIGTERM', async () => {
    expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'ready', checks: { 'routing-table': { ready: true } } });
    expect(await router.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
    expect(router.stderr).toBe('');
  });
});
