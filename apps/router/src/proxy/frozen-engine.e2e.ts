// An engine frozen with SIGSTOP behind a real router: the kernel still accepts connections for
// it, but nothing answers — not /metrics, not requests. The replicas are real sim-engine
// processes; the clients are the official openai package with a patience far below the
// router's 300 s default first-byte timeout, so a request that waits for the frozen engine
// fails the test.
import OpenAI from 'openai';
import { stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { sampleValue, startRouter, startSimEngine, tempDir, writeRouterConfig, type RouterUnderTest, type SimEngine } from '../test/router.harness';

const dir = tempDir();
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await stopAllSpawned();
});

const ENGINE_ARGS = ['--engine', 'vllm', '--served-model-name', 'm1', '--decode-tps', '200', '--output-tokens', '8', '--output-jitter', '0'];

/** Two sim-engines (r0, r1) behind a router in static mode; `model` adds catalog fields to m1. */
async function fleet(env: Record<string, string>, model: Record<string, unknown> = {}, engineArgs: readonly string[][] = [[], []]) {
  const replicas: SimEngine[] = await Promise.all(engineArgs.map((extra, i) => startSimEngine([...ENGINE_ARGS, '--seed', String(i), ...extra], `sim-engine-${i}`)));
  // A frozen process ignores SIGTERM until it runs again: wake it so it can be stopped.
  cleanups.push(() => replicas.forEach((r) => r.proc.signal('SIGCONT')));
  const file = writeRouterConfig(dir, {
    models: [{ name: 'm1', engine: 'vllm', ...model }],
    endpoints: replicas.map((r, i) => ({ id: `r${i}`, model: 'm1', url: r.url })),
  });
  const router = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: file, ...env });
  cleanups.push(() => router.close());
  // Each replica's first scrape is in before a test freezes one (a pending one would count against it).
  await waitFor(() => replicas.every((_, i) => router.core.endpoints.get(`r${i}`)?.lastScrape !== undefined), {
    deadlineMs: 10_000,
    message: 'every replica scraped',
  });
  const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20_000 });
  return { replicas, router, client };
}

async function metricsText(r: RouterUnderTest): Promise<string> {
  return (await fetch(`${r.url}/metrics`)).text();
}

const ask = (client: OpenAI, n: number) => client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `question ${n}` }] });

describe('an engine frozen with SIGSTOP', () => {
  it(
    'becomes suspect, then unavailable, as its scrapes go unanswered; requests go to the other replica; SIGCONT brings it back',
    async () => {
      // Least-load: the scrape-health filter and scorer are under test, and "r0 chosen again" needs one prompt to reach either replica.
      const { replicas, router, client } = await fleet(
        {
          LLMGW_ROUTER_SCRAPE_INTERVAL: '100ms',
          LLMGW_ROUTER_SCRAPE_TIMEOUT: '200ms',
          LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER: '3',
        },
        { routing: { policy: 'least-load' } },
      );
      const r0 = () => router.core.endpoints.get('r0');
      expect(r0()?.scrapeHealth).toBe('ok');

      replicas[0].proc.signal('SIGSTOP');
      await waitFor(() => r0()?.scrapeHealth === 'unavailable', { deadlineMs: 10_000, message: 'r0 unavailable' });
      const frozen = await metricsText(router);
      expect(sampleValue(frozen, 'llmgw_router_scrape_health', { endpoint: 'r0', state: 'unavailable' })).toBe(1);
      expect(sampleValue(frozen, 'llmgw_router_scrape_health', { endpoint: 'r1', state: 'ok' })).toBe(1);
      expect(sampleValue(frozen, 'llmgw_router_scrape_errors_total', { endpoint: 'r0', reason: 'timeout' })).toBeGreaterThanOrEqual(3);

      // Every request is answered, by r1: none is sent to the frozen engine.
      const sentToR0 = r0()?.lastUsedAt;
      const answers = await Promise.all(Array.from({ length: 8 }, (_, n) => ask(client, n)));
      for (const a of answers) expect(a.choices[0].finish_reason).toBe('stop');
      expect(r0()?.lastUsedAt).toBe(sentToR0);
      expect(r0()?.inFlight).toBe(0);

      replicas[0].proc.signal('SIGCONT');
      await waitFor(() => r0()?.scrapeHealth === 'ok', { deadlineMs: 10_000, message: 'r0 back to ok' });
      expect(sampleValue(await metricsText(router), 'llmgw_router_scrape_health', { endpoint: 'r0', state: 'ok' })).toBe(1);
      await waitFor(
        async () => {
          await ask(client, 99);
          return r0()?.lastUsedAt !== sentToR0;
        },
        { deadlineMs: 10_000, message: 'r0 chosen again' },
      );
    },
    60_000,
  );

  it(
    "ends an attempt at the model's first-byte deadline and retries it on the other replica",
    async () => {
      // Scrapes are kept out of it (one an hour): the deadline alone must save these requests.
      const { replicas, router, client } = await fleet({ LLMGW_ROUTER_SCRAPE_INTERVAL: '1h' }, { firstByteTimeout: '1s' });
      replicas[0].proc.signal('SIGSTOP');

      const answers = await Promise.all(Array.from({ length: 8 }, (_, n) => ask(client, n)));
      for (const a of answers) expect(a.choices[0].finish_reason).toBe('stop');

      // Some of them were sent to the frozen r0 first (in-flight spreads them), and went on to r1.
      const text = await metricsText(router);
      expect(sampleValue(text, 'llmgw_router_upstream_errors_total', { endpoint: 'r0', kind: 'timeout' })).toBeGreaterThanOrEqual(1);
      expect(sampleValue(text, 'llmgw_router_retries_total', { model: 'm1', reason: 'timeout' })).toBe(
        sampleValue(text, 'llmgw_router_upstream_errors_total', { endpoint: 'r0', kind: 'timeout' }),
      );
      expect(router.core.endpoints.get('r0')?.inFlight).toBe(0);
    },
    60_000,
  );

  it(
    "ends a stream that stalls past the model's stall deadline with an OpenAI-shaped SSE error",
    async () => {
      // One slow replica, so the stream is surely on it when it freezes.
      const { replicas, client } = await fleet({ LLMGW_ROUTER_SCRAPE_INTERVAL: '1h' }, { stallTimeout: '1s' }, [['--decode-tps', '20', '--output-tokens', '200']]);
      const stream = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: 'a long answer' }], stream: true });
      let chunks = 0;
      let error: unknown;
      try {
        for await (const _chunk of stream) {
          if (++chunks === 3) replicas[0].proc.signal('SIGSTOP');
        }
      } catch (e) {
        error = e;
      }
      expect(chunks).toBeGreaterThanOrEqual(3);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/stopped in the middle of the response: no data for 1000 ms/);
    },
    60_000,
  );
});

describe('an engine that dies after its response head, before its first content', () => {
  it(
    'is retried on another replica: the client sees one whole stream, never the dead one',
    async () => {
      const { router, client } = await fleet({ LLMGW_ROUTER_SCRAPE_INTERVAL: '1h', LLMGW_ROUTER_BREAKER_FAILURES: '100' }, {}, [['--fail-before-content'], []]);
      const streams = await Promise.all(
        Array.from({ length: 8 }, async (_, n) => {
          const stream = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `stream ${n}` }], stream: true });
          let content = '';
          let finish: string | null | undefined;
          for await (const chunk of stream) {
            content += chunk.choices[0]?.delta.content ?? '';
            finish = chunk.choices[0]?.finish_reason ?? finish;
          }
          return { content, finish };
        }),
      );
      for (const s of streams) {
        expect(s.finish).toBe('stop');
        expect(s.content).not.toBe('');
      }
      const text = await metricsText(router);
      // Those first sent to r0 got its head and role chunk, then a closed connection, and went on to r1.
      const reset = sampleValue(text, 'llmgw_router_upstream_errors_total', { endpoint: 'r0', kind: 'reset' }) ?? 0;
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(sampleValue(text, 'llmgw_router_retries_total', { model: 'm1', reason: 'reset' })).toBe(reset);
      expect(sampleValue(text, 'llmgw_router_stream_errors_total', { model: 'm1' })).toBeUndefined();
    },
    60_000,
  );
});
