// Key limits that hold exactly across three real router processes sharing the machine's Redis
// (a key prefix of this test's own), counted where the limiter keeps them:
// - concurrency 4: sampled every 10 ms at the one engine serving the model, never above 4 (and
//   reached);
// - 120 requests per minute, hammered through all three routers across two full windows:
//   exactly 120 admitted in each;
// - tokens per minute: the tokens admitted in each of two full windows stay within the limit and
//   above the limit minus one request's reservation.
// The windows are the limiter's own: they start at the first admission's time on Redis's clock
// (the score the admission script wrote), and each admission is placed in a window by its score.
// The window is the product's minute (it is not a setting), so this test runs a little over two
// minutes.
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { openStore, type Store } from '@llmgw/store';
import { sqliteBackend, stopAllSpawned, testRedisUrl, waitFor } from '@llmgw/testing';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, startRouterProcesses } from './test/controller.harness';

const WINDOW_MS = 60_000;
const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

const hash = (secret: string): string => createHash('sha256').update(secret).digest('hex');
/** Admissions in each full window from `t0` on: [t0, t0 + W), [t0 + W, t0 + 2W). */
const perWindow = (entries: Iterable<{ at: number; amount: number }>, t0: number): [number, number] => {
  const sums: [number, number] = [0, 0];
  for (const e of entries) {
    const w = Math.floor((e.at - t0) / WINDOW_MS);
    if (w === 0 || w === 1) sums[w] += e.amount;
  }
  return sums;
};

describe('key limits across three routers and Redis, window by window', () => {
  it('never run more than the concurrency limit, and admit exactly the request and token limits in each of two full windows', async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }, { name: 'conc', replicas: 1 }]));
    cleanups.push(() => db.drop(), () => file.cleanup());
    const routerToken = 'router-windows-token-0123456789';
    const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_CONTROLLER_SETTLE: '500ms', LLMGW_CONTROLLER_ROUTER_TOKEN: routerToken });
    cleanups.push(() => controller.close());
    const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], engines: 'sim' });
    cleanups.push(() => agent.stop());
    agent.connect();

    const store: Store = await openStore(db.url, { migrate: false });
    cleanups.push(() => store.close());
    const run = randomUUID().slice(0, 8);
    const key = async (name: string, limits: object): Promise<{ name: string; secret: string }> => {
      const secret = `llmgw-windows-${name}-${run}-0123456789abcdef`;
      await store.apiKeys.create(`${name}-${run}`, { owner: 'load-test', models: ['*'], limits }, hash(secret));
      return { name: `${name}-${run}`, secret };
    };
    const plain = await key('plain', {});
    const conc = await key('conc', { concurrentRequests: 4 });
    const rpm = await key('rpm', { requestsPerMinute: 120 });
    const TPM = 3_000;
    const tpm = await key('tpm', { tokensPerMinute: TPM });

    const prefix = `llmgw-test:${run}:`;
    const redis = new Redis(testRedisUrl());
    cleanups.push(async () => {
      const left = await redis.keys(`${prefix}*`);
      if (left.length > 0) await redis.del(...left);
      await redis.quit();
    });
    const { processes: routers, bases } = await startRouterProcesses(3, (i) => ({
      LLMGW_ROUTER_ID: `windows-${i}`,
      LLMGW_ROUTER_CONTROLLER: controller.grpc,
      LLMGW_ROUTER_CONTROLLER_TOKEN: routerToken,
      LLMGW_REDIS_URL: testRedisUrl(),
      LLMGW_ROUTER_REDIS_PREFIX: prefix,
      // Far above any answer time here: a slow answer must not send a router to its share (that is router-limits-outage.e2e).
      LLMGW_ROUTER_REDIS_TIMEOUT: '5s',
    }));
    cleanups.push(() => Promise.all(routers.map((r) => r.stop())));
    const body = (model: string, maxTokens: number): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens });
    const chat = (base: string, secret: string, payload: string) =>
      fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` }, body: payload });
    // Every router serves both models (through the key without limits, which spends nothing of the others).
    await waitFor(
      async () => (await Promise.all(bases.flatMap((b) => ['llama', 'conc'].map(async (m) => (await chat(b, plain.secret, body(m, 1))).status)))).every((s) => s === 200),
      { deadlineMs: 60_000, message: 'every router serves both models' },
    );
    const metricsUrl = `${controller.plane.publisher.current()?.endpoints.find((e) => e.model === 'conc')?.url}/metrics`;
    const inFlightAtEngine = async (): Promise<number> => {
      const text = await (await fetch(metricsUrl)).text();
      const value = (name: string): number => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
      return value('vllm:num_requests_running') + value('vllm:num_requests_waiting');
    };
    expect(await inFlightAtEngine()).toBe(0);

    // 1. Concurrency 4, twelve clients over three routers; the engine sampled every 10 ms until it
    //    has been sampled 500 times (at least 5 s; longer on a busy machine).
    const SAMPLES = 500;
    const samples: number[] = [];
    const sampler = setInterval(() => void inFlightAtEngine().then((n) => samples.push(n), () => undefined), 10);
    let concAnswered = 0;
    let concRefused = 0;
    const concDeadline = Date.now() + 90_000;
    await Promise.all(
      Array.from({ length: 12 }, async (_, w) => {
        while (samples.length < SAMPLES && Date.now() < concDeadline) {
          const r = await chat(bases[w % 3], conc.secret, body('conc', 20));
          await r.arrayBuffer();
          if (r.status === 200) concAnswered++;
          else if (r.status === 429) {
            concRefused++;
            await sleep(5);
          } else throw new Error(`unexpected ${r.status}`);
        }
      }),
    );
    clearInterval(sampler);
    process.stdout.write(`[windows] concurrency 4: ${concAnswered} answered, ${concRefused} refused; ${samples.length} samples at the engine, most in flight ${Math.max(...samples)}\n`);
    expect(samples.length).toBeGreaterThanOrEqual(SAMPLES);
    expect(samples.every((n) => Number.isInteger(n))).toBe(true);
    expect(Math.max(...samples)).toBe(4);
    expect(concRefused).toBeGreaterThan(0);

    // 2. Requests and tokens per minute, hammered at once through all three routers for two full
    //    windows. What the limiter recorded is read from Redis every 250 ms: an entry stays there
    //    for a whole window, so none is missed; a token entry's amount is the latest seen (the
    //    reservation, then what the answer used once settled).
    const reqKey = `${prefix}{${rpm.name}}:req`;
    const tokKey = `${prefix}{${tpm.name}}:tokens`;
    const requests = new Map<string, number>();
    const tokens = new Map<string, { at: number; amount: number }>();
    const poll = async (): Promise<number> => {
      const [[, req], [, tok], [, time]] = (await redis.multi().zrange(reqKey, 0, -1, 'WITHSCORES').zrange(tokKey, 0, -1, 'WITHSCORES').time().exec()) as [unknown, string[]][];
      for (let i = 0; i < req.length; i += 2) requests.set(req[i], Number(req[i + 1]));
      for (let i = 0; i < tok.length; i += 2) {
        const cut = tok[i].lastIndexOf(':');
        tokens.set(tok[i].slice(0, cut), { at: Number(tok[i + 1]), amount: Number(tok[i].slice(cut + 1)) });
      }
      return Number(time[0]) * 1_000 + Math.floor(Number(time[1]) / 1_000);
    };
    const first = (m: Iterable<number>): number => Math.min(...m);
    const rpmBody = body('llama', 1);
    const tpmBody = body('llama', 50);
    // What one token request reserves: its max_tokens plus the router's estimate of its prompt (a token per 4 bytes).
    const reservation = 50 + Math.ceil(Buffer.byteLength(tpmBody) / 4);
    let stop = false;
    let rpmAnswered = 0;
    let rpmRefused = 0;
    let tpmRefused = 0;
    const used: number[] = [];
    const hammer = (secret: string, payload: string, onAnswer: (json: { usage: { prompt_tokens: number; completion_tokens: number } }) => void, onRefused: () => void) =>
      Array.from({ length: 4 }, async (_, w) => {
        while (!stop) {
          const r = await chat(bases[w % 3], secret, payload);
          const text = await r.text();
          if (r.status === 200) onAnswer(JSON.parse(text) as never);
          else if (r.status === 429) {
            onRefused();
            await sleep(20);
          } else throw new Error(`unexpected ${r.status}: ${text}`);
        }
      });
    const clients = [
      ...hammer(rpm.secret, rpmBody, () => rpmAnswered++, () => rpmRefused++),
      ...hammer(tpm.secret, tpmBody, (j) => used.push(j.usage.prompt_tokens + j.usage.completion_tokens), () => tpmRefused++),
    ];
    // Until two full windows of both keys are behind (plus a second), by Redis's clock.
    await waitFor(
      async () => {
        const now = await poll();
        return requests.size > 0 && tokens.size > 0 && now >= Math.max(first(requests.values()), first([...tokens.values()].map((t) => t.at))) + 2 * WINDOW_MS + 1_000;
      },
      { deadlineMs: 3 * WINDOW_MS, intervalMs: 250, message: 'two full windows of both keys' },
    );
    stop = true;
    await Promise.all(clients);
    // The last answers' settles reach Redis within a few ms; then every entry holds what its request used.
    const settled = async (): Promise<boolean> => {
      await poll();
      return [...tokens.values()].reduce((n, t) => n + t.amount, 0) === used.reduce((n, u) => n + u, 0);
    };
    await waitFor(settled, {
      deadlineMs: 5_000,
      message: 'every answered token request settled in Redis',
    });

    const t0 = first(requests.values());
    const rpmWindows = perWindow([...requests.values()].map((at) => ({ at, amount: 1 })), t0);
    const tokenT0 = first([...tokens.values()].map((t) => t.at));
    const tpmWindows = perWindow(tokens.values(), tokenT0);
    process.stdout.write(
      `[windows] 120/min: ${rpmWindows.join(' + ')} admitted in two windows (${rpmAnswered} answered in all, ${rpmRefused} refused); ` +
        `${TPM} tokens/min: ${tpmWindows.join(' + ')} tokens in two windows (${used.length} answered, ${tpmRefused} refused, reservation ${reservation})\n`,
    );
    // What Redis recorded is what the clients got: one entry per answered request, the tokens their answers reported.
    expect(requests.size).toBe(rpmAnswered);
    expect(tokens.size).toBe(used.length);
    expect(Math.max(...used)).toBeLessThanOrEqual(reservation);
    expect(rpmWindows).toEqual([120, 120]);
    expect(rpmRefused).toBeGreaterThan(0);
    for (const sum of tpmWindows) {
      expect(sum).toBeLessThanOrEqual(TPM);
      expect(sum).toBeGreaterThan(TPM - reservation);
    }
    expect(tpmRefused).toBeGreaterThan(0);
  }, 330_000);
});
