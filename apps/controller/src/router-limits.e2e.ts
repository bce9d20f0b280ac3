// Key limits that mean the number the operator wrote, with three real router processes sharing
// the machine's Redis: a key limited to 120 requests per minute, hammered through all three,
// gets exactly 120 answered and the rest 429 in OpenAI's shape with Retry-After and the
// x-ratelimit-* headers. A busy key far from its limit is admitted from batches of permits the
// routers take ahead of use, and Redis ends up holding exactly the requests answered. Streams get
// their usage counted without the client seeing a usage chunk it did not ask for.
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import OpenAI from 'openai';
import { openStore, type Store } from '@llmgw/store';
import { sqliteBackend, stopAllSpawned, testRedisUrl, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, startRouterProcesses } from './test/controller.harness';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

const hash = (secret: string): string => createHash('sha256').update(secret).digest('hex');

describe('key limits across three routers and Redis', () => {
  it('answer exactly the limit across the fleet, refuse the rest as OpenAI does, and keep streams as the client asked', async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
    cleanups.push(() => db.drop(), () => file.cleanup());
    const routerToken = 'router-limits-token-0123456789';
    const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '500ms', LLMGW_CONTROLLER_ROUTER_TOKEN: routerToken });
    cleanups.push(() => controller.close());
    const agents = [new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'sim' }), new FakeAgent({ nodeId: 'node-2', controllers: [controller.grpc], engines: 'sim' })];
    cleanups.push(() => Promise.all(agents.map((a) => a.stop())));
    for (const a of agents) a.connect();

    const store: Store = await openStore(db.url, { migrate: false });
    cleanups.push(() => store.close());
    const run = randomUUID().slice(0, 8);
    const secret = `llmgw-limits-${run}-0123456789abcdef`;
    const name = `hammer-${run}`;
    await store.apiKeys.create(name, { owner: 'load-test', models: ['*'], limits: { requestsPerMinute: 120 } }, hash(secret));
    const busySecret = `llmgw-busy-${run}-0123456789abcdef`;
    await store.apiKeys.create(`busy-${run}`, { owner: 'load-test', models: ['*'], limits: { requestsPerMinute: 6_000 } }, hash(busySecret));
    const plain = `llmgw-plain-${run}-0123456789abcdef`;
    await store.apiKeys.create(`plain-${run}`, { owner: 'streams', models: ['*'], limits: {} }, hash(plain));

    const { processes: routers, bases } = await startRouterProcesses(3, (i) => ({
      LLMGW_ROUTER_ID: `router-${i}`,
      LLMGW_ROUTER_CONTROLLER: controller.grpc,
      LLMGW_ROUTER_CONTROLLER_TOKEN: routerToken,
      LLMGW_REDIS_URL: testRedisUrl(),
      LLMGW_ROUTER_REDIS_TIMEOUT: '2s',
      LLMGW_ROUTER_USAGE_INTERVAL: '200ms',
    }));
    cleanups.push(() => Promise.all(routers.map((r) => r.stop())));
    const chat = (base: string, key: string) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }),
      });
    // Every router serves the keyed model (the plain key has no limits, so this spends nothing of the hammered one).
    await waitFor(async () => (await Promise.all(bases.map(async (b) => (await chat(b, plain)).status))).every((s) => s === 200), { deadlineMs: 60_000, message: 'every router serves with a key' });

    const results: { status: number; headers: Headers; body: string }[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < 180) {
        const i = next++;
        const r = await chat(bases[i % 3], secret);
        results.push({ status: r.status, headers: r.headers, body: await r.text() });
      }
    };
    await Promise.all(Array.from({ length: 12 }, () => worker()));
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    process.stdout.write(`[limits] 180 requests over 3 routers, limit 120/min: ${ok.length} answered, ${refused.length} refused\n`);
    expect(ok).toHaveLength(120);
    expect(refused).toHaveLength(60);
    expect(JSON.parse(refused[0].body)).toMatchObject({ error: { code: 'rate_limit_exceeded', type: 'requests' } });
    expect(Number(refused[0].headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused[0].headers.get('x-ratelimit-limit-requests')).toBe('120');
    expect(refused[0].headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(ok[0].headers.get('x-ratelimit-limit-requests')).toBe('120');
    expect(ok[0].headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+(ms|s|m\d+s)$/);

    // What the 120 answers said they used is what the store holds for the key, per the routers' reports.
    const answered = ok.map((r) => (JSON.parse(r.body) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage);
    const want = { requests: 120, promptTokens: answered.reduce((n, u) => n + u.prompt_tokens, 0), completionTokens: answered.reduce((n, u) => n + u.completion_tokens, 0) };
    const stored = async () => {
      const rows = await store.keyUsage.query(0, name);
      return { requests: rows.reduce((n, r) => n + r.requests, 0), promptTokens: rows.reduce((n, r) => n + r.promptTokens, 0), completionTokens: rows.reduce((n, r) => n + r.completionTokens, 0) };
    };
    await waitFor(async () => (await stored()).requests >= 120, { deadlineMs: 10_000, message: 'key usage reported and stored' });
    expect(await stored()).toEqual(want);

    // A busy key far from its limit (6,000 a minute: batches of up to 6,000 ÷ 60 ÷ 3 = 33 per
    // router): every request answered, some admitted from batches, and once the batches have ended
    // (a second) Redis holds one entry per answered request: what the batches did not use went back.
    let busyNext = 0;
    const busyStatuses: number[] = [];
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        while (busyNext < 300) {
          const i = busyNext++;
          const r = await chat(bases[i % 3], busySecret);
          await r.arrayBuffer();
          busyStatuses.push(r.status);
        }
      }),
    );
    await sleep(1_500);
    const redis = new Redis(testRedisUrl());
    cleanups.push(() => redis.quit());
    const entries = await redis.zrange(`llmgw:limits:{busy-${run}}:req`, 0, -1);
    process.stdout.write(`[limits] busy key, 300 requests: ${entries.filter((e) => e.includes('.batch#')).length} of ${entries.length} entries from batches\n`);
    expect(busyStatuses.filter((s) => s === 200)).toHaveLength(300);
    expect(entries).toHaveLength(300);
    expect(entries.filter((e) => e.includes('.batch#')).length).toBeGreaterThan(0);

    // A stream that did not ask for usage gets none, one that asked gets it, through the official client.
    const client = new OpenAI({ baseURL: `${bases[0]}/v1`, apiKey: plain, maxRetries: 0 });
    const chunks = async (includeUsage: boolean) => {
      const stream = await client.chat.completions.create({ model: 'llama', messages: [{ role: 'user', content: 'count' }], max_tokens: 5, stream: true, ...(includeUsage && { stream_options: { include_usage: true } }) });
      const seen: { usage?: unknown; choices: unknown[] }[] = [];
      for await (const c of stream) seen.push(c as never);
      return seen;
    };
    const completionTokens = async (): Promise<number> => {
      const text = await (await fetch(`${bases[0]}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('llmgw_router_tokens_total{') && l.includes('kind="completion"'));
      return line === undefined ? 0 : Number(line.split(' ').at(-1));
    };
    const before = await completionTokens();
    const without = await chunks(false);
    // The router asked the engine for the usage chunk and counted it, though the client saw none.
    await waitFor(async () => (await completionTokens()) > before, { deadlineMs: 5_000, message: "the stream's tokens counted" });
    expect(without.length).toBeGreaterThan(0);
    expect(without.filter((c) => c.usage !== undefined && c.usage !== null)).toEqual([]);
    const asked = await chunks(true);
    expect(asked.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) } });
    for (const r of routers) expect(r.stdout + r.stderr).not.toContain(secret);
    // Per-key series are off unless asked for (LLMGW_ROUTER_KEY_METRICS): no sample names a key.
    expect(await (await fetch(`${bases[0]}/metrics`)).text()).not.toMatch(/^llmgw_router_key_\w+\{/m);
  }, 180_000);
});
