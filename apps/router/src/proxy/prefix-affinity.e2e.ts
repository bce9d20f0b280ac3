// Prefix affinity end to end, through the official openai client: two multi-turn conversations
// over 4 sim-engine replicas (vLLM flavour, prefix cache on) land each on its own replica turn
// after turn — the one rendezvous hashing names for its start, so the engine's prefix cache
// serves every later turn — and one moves when its replica saturates, then comes back once the
// replica is free again (and its load averaged over the last seconds is down to one request). The router's opt-in debug header says where each turn went and why.
import OpenAI from 'openai';
import { DEFAULT_PREFIX_AFFINITY } from '@llmgw/domain';
import { rendezvousOrder, requestPrefixKey, type Candidate } from '@llmgw/routing';
import { stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { sampleValue, startRouter, startSimEngine, tempDir, writeRouterConfig, type RouterUnderTest } from '../test/router.harness';

const REPLICAS = 4;
const TURNS = 4;
type Message = { role: 'system' | 'user' | 'assistant'; content: string };

let router: RouterUnderTest | undefined;
const saturating = new AbortController();
afterAll(async () => {
  saturating.abort();
  await router?.close();
  await stopAllSpawned();
});

const ids = Array.from({ length: REPLICAS }, (_, i) => `r${i}`);
/** The replica ids in the rendezvous order of a conversation's start, as any router computes it. */
function orderOf(system: string, firstQuestion: string): string[] {
  const key = requestPrefixKey({ messages: [{ role: 'system', content: system }, { role: 'user', content: firstQuestion }] }, 'chat', DEFAULT_PREFIX_AFFINITY);
  if (key === undefined) throw new Error('no prefix key');
  return rendezvousOrder(key.hash, ids.map((id) => ({ id }) as Candidate)).map((c) => c.id);
}

/** `replica=<id>; …` from the debug header. */
function routeOf(header: string | null): { replica: string; header: string } {
  const m = /^replica=([^;]+);/.exec(header ?? '');
  if (m === null) throw new Error(`no x-llmgw-route header (got ${JSON.stringify(header)})`);
  return { replica: m[1], header: header as string };
}

describe('prefix affinity through the openai client', () => {
  it(
    'keeps each conversation on its own replica turn after turn, moves it when that replica saturates, and brings it back',
    async () => {
      // Replicas decode one sequence at a time (so a few requests sent straight to one saturate it); turns are short.
      const args = ['--engine', 'vllm', '--served-model-name', 'm1', '--prefix-cache', '--max-running', '1', '--decode-tps', '200', '--output-tokens', '6', '--output-jitter', '0'];
      const engines = await Promise.all(ids.map((id, i) => startSimEngine([...args, '--seed', String(i)], `sim-engine-${id}`)));
      const file = writeRouterConfig(tempDir(), { models: [{ name: 'm1', engine: 'vllm' }], endpoints: engines.map((e, i) => ({ id: ids[i], model: 'm1', url: e.url })) });
      router = await startRouter({
        LLMGW_ROUTER_CONFIG_FILE: file,
        LLMGW_ROUTER_SCRAPE_INTERVAL: '100ms',
        LLMGW_ROUTER_MAX_WAITING: '2',
        LLMGW_ROUTER_DEBUG_HEADER: 'true',
      });
      const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
      // Every replica's first scrape is in before the first turn: a first turn is a cold key, which
      // goes by load, and a replica not yet scraped scores lower on KV headroom (ignorance never
      // looks empty). This test is about steady behaviour, not about the router's first 100 ms.
      const routerUnderTest = router;
      await waitFor(() => ids.every((id) => routerUnderTest.core.endpoints.get(id)?.lastScrape !== undefined), {
        deadlineMs: 10_000,
        message: 'every replica scraped',
      });

      // Two conversations whose starts have different home replicas (found, not assumed).
      const system = 'You are a careful assistant. '.repeat(40);
      const starts: { question: string; order: string[] }[] = [];
      for (let n = 0; starts.length < 2; n++) {
        const question = `Conversation ${n}: tell me about topic ${n}.`;
        const order = orderOf(system, question);
        if (starts.every((s) => s.order[0] !== order[0])) starts.push({ question, order });
      }
      const conversations = starts.map((s) => ({ ...s, messages: [{ role: 'system', content: system }, { role: 'user', content: s.question }] as Message[] }));

      /** One turn: send the conversation so far, append the answer and the next question; the replica, the header and the cached prompt tokens. */
      const turn = async (c: (typeof conversations)[number], n: number) => {
        const { data, response } = await client.chat.completions.create({ model: 'm1', messages: c.messages, max_tokens: 6 }).withResponse();
        c.messages.push({ role: 'assistant', content: data.choices[0].message.content ?? '' }, { role: 'user', content: `Follow-up ${n}: go on.` });
        return { ...routeOf(response.headers.get('x-llmgw-route')), cached: data.usage?.prompt_tokens_details?.cached_tokens ?? 0 };
      };

      // 1. Turn after turn, each conversation lands on its home replica, and from the second turn on its prompt is served from the cache.
      for (let n = 1; n <= TURNS; n++) {
        const got = await Promise.all(conversations.map((c) => turn(c, n)));
        got.forEach((g, i) => {
          expect(g.replica, g.header).toBe(conversations[i].order[0]);
          expect(g.header).toContain('policy=prefix-affinity; rank=0');
          if (n > 1) expect(g.cached, `turn ${n} of conversation ${i}: cached prompt tokens`).toBeGreaterThan(0);
        });
      }

      // 2. Saturate the first conversation's home replica with long requests sent straight to it, until the router's scrape sees its queue.
      const [a, b] = conversations;
      const home = a.order[0];
      const homeEngine = engines[ids.indexOf(home)];
      for (let i = 0; i < 3; i++) {
        void fetch(`${homeEngine.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm1', messages: [{ role: 'user', content: `hog ${i}` }], max_tokens: 5_000, ignore_eos: true }),
          signal: saturating.signal,
        }).catch(() => undefined);
      }
      const routerWaiting = async (): Promise<number | undefined> => sampleValue(await router!.metricsRegistry.metrics(), 'llmgw_router_engine_load', { endpoint: home, field: 'waiting' });
      await waitFor(async () => ((await routerWaiting()) ?? 0) >= 2, { deadlineMs: 20_000, message: `the router seeing ${home} saturated` });

      // 3. The next turn moves off the saturated replica (the header names it as passed over); the other conversation stays put.
      const moved = await turn(a, TURNS + 1);
      expect(moved.replica, moved.header).not.toBe(home);
      expect(moved.header).toMatch(new RegExp(`deflected=([^;]*,)?${home}(,|$|;)`));
      if (b.order[0] !== home) {
        const stayed = await turn(b, TURNS + 1);
        expect(stayed.replica, stayed.header).toBe(b.order[0]);
      }

      // 4. Once the replica is free again, the conversation goes back to it (affinity is a function of the prompt, not of history).
      saturating.abort();
      await waitFor(async () => (await routerWaiting()) === 0, { deadlineMs: 20_000, message: `the router seeing ${home} free again` });
      await waitFor(async () => sampleValue(await router!.metricsRegistry.metrics(), 'llmgw_router_engine_load', { endpoint: home, field: 'running' }) === 0, {
        deadlineMs: 20_000,
        message: `${home} running nothing`,
      });
      // The guard also weighs each replica's load averaged over the last seconds (τ = 5 s): the
      // saturated replica takes its prefixes back once that average is down to one request.
      await waitFor(() => (router!.core.endpoints.get(home)?.candidate(Date.now()).averageLoad ?? Infinity) <= 1, {
        deadlineMs: 30_000,
        message: `${home}'s load average back to one request`,
      });
      const back = await turn(a, TURNS + 2);
      expect(back.replica, back.header).toBe(home);
      expect(back.cached).toBeGreaterThan(0);

      // The router counted it: each conversation's first turn as cold (its key new to this router), hits for the later turns at
      // home, a miss and a deflection for the move, the key's depth in blocks.
      const metrics = await router.metricsRegistry.metrics();
      expect(sampleValue(metrics, 'llmgw_router_prefix_affinity_requests_total', { model: 'm1', result: 'cold' })).toBe(2);
      expect(sampleValue(metrics, 'llmgw_router_prefix_affinity_requests_total', { model: 'm1', result: 'hit' })).toBeGreaterThanOrEqual(2 * (TURNS - 1) + 1);
      expect(sampleValue(metrics, 'llmgw_router_prefix_affinity_requests_total', { model: 'm1', result: 'miss' })).toBeGreaterThanOrEqual(1);
      expect(sampleValue(metrics, 'llmgw_router_prefix_affinity_deflections_total', { model: 'm1' })).toBeGreaterThanOrEqual(1);
      expect(sampleValue(metrics, 'llmgw_router_prefix_affinity_depth_blocks_count', { model: 'm1' })).toBeGreaterThanOrEqual(2 * TURNS + 2);
    },
    120_000,
  );
});
