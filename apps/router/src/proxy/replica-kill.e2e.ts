// Killing an engine replica while 16 clients stream through the router: requests that had not
// received a byte succeed on another replica, streams cut mid-way end with an OpenAI-shaped
// SSE error within a deadline, and no request hangs. The replicas are real sim-engine
// processes; the clients are the official openai package.
import OpenAI from 'openai';
import { stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { startRouter, startSimEngine, tempDir, writeRouterConfig, type RouterUnderTest, type SimEngine } from '../test/router.harness';

const CLIENTS = 16;
/** A cut stream must end (with its error event) this soon after the kill. */
const CUT_DEADLINE_MS = 5_000;

let router: RouterUnderTest | undefined;
afterAll(async () => {
  await router?.close();
  await stopAllSpawned();
});

interface Outcome {
  client: number;
  startedAt: number;
  endedAt: number;
  chunks: number;
  finished: boolean;
  error?: string;
}

describe('a replica killed under load', () => {
  it(
    'retries what had no first byte, ends cut streams with an SSE error, and leaves nothing hanging',
    async () => {
      // Slow decode so streams are in flight when the kill lands; few slots so requests also wait inside engines (no byte yet).
      const args = ['--engine', 'vllm', '--served-model-name', 'm1', '--decode-tps', '20', '--output-tokens', '24', '--output-jitter', '0', '--max-running', '2', '--batch-slowdown', '0'];
      const replicas: SimEngine[] = await Promise.all([0, 1, 2].map((i) => startSimEngine([...args, '--seed', String(i)], `sim-engine-${i}`)));
      const file = writeRouterConfig(tempDir(), {
        models: [{ name: 'm1', engine: 'vllm' }],
        endpoints: replicas.map((r, i) => ({ id: `r${i}`, model: 'm1', url: r.url })),
      });
      router = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: file, LLMGW_ROUTER_SCRAPE_INTERVAL: '200ms', LLMGW_ROUTER_BREAKER_FAILURES: '2', LLMGW_ROUTER_BREAKER_COOLDOWN: '60s' });
      const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30_000 });

      let killedAt = Infinity;
      const stopAt = performance.now() + 6_000;
      const outcomes: Outcome[] = [];
      const runClient = async (n: number): Promise<void> => {
        while (performance.now() < stopAt) {
          const o: Outcome = { client: n, startedAt: performance.now(), endedAt: 0, chunks: 0, finished: false };
          outcomes.push(o);
          try {
            const stream = await client.chat.completions.create({ model: 'm1', messages: [{ role: 'user', content: `client ${n}` }], stream: true });
            for await (const chunk of stream) {
              o.chunks++;
              if (chunk.choices[0]?.finish_reason) o.finished = true;
            }
          } catch (error) {
            o.error = error instanceof Error ? error.message : String(error);
          }
          o.endedAt = performance.now();
        }
      };
      const clients = Array.from({ length: CLIENTS }, (_, n) => runClient(n));

      // Kill the replica once it is streaming and has requests waiting inside it.
      const victim = replicas[0];
      // Busy for 300 ms on end: its two decoding slots have been streaming (20 tokens/s) for a while,
      // so the kill cuts streams mid-way rather than only requests that had no byte yet.
      let busySince: number | undefined;
      await waitFor(
        () => {
          const busy = (router?.core.endpoints.get('r0')?.inFlight ?? 0) >= 3;
          busySince = busy ? (busySince ?? performance.now()) : undefined;
          return busySince !== undefined && performance.now() - busySince >= 300;
        },
        { deadlineMs: 15_000, intervalMs: 5, message: 'r0 busy for 300 ms' },
      );
      await waitFor(() => outcomes.some((o) => o.chunks > 0 && o.endedAt === 0), { deadlineMs: 10_000, intervalMs: 5, message: 'streams running' });
      await victim.proc.kill9();
      killedAt = performance.now();

      // Nothing hangs: every client loop ends within the run plus one stream's length and the cut deadline.
      await Promise.race([
        Promise.all(clients),
        new Promise((_, reject) => setTimeout(() => reject(new Error('a client hung')), 20_000)),
      ]);

      const failed = outcomes.filter((o) => o.error !== undefined);
      const cut = failed.filter((o) => o.startedAt < killedAt && o.chunks > 0);
      // Every failure is a stream the dead replica had already started, ended by our SSE error event.
      expect(failed.map((o) => ({ chunks: o.chunks > 0, error: o.error }))).toEqual(
        cut.map(() => ({ chunks: true, error: expect.stringMatching(/stopped in the middle of the response/) })),
      );
      expect(cut.length).toBeGreaterThanOrEqual(1);
      for (const o of cut) expect(o.endedAt - killedAt).toBeLessThan(CUT_DEADLINE_MS);
      // Everything else completed, including requests in flight at the kill that had no byte yet.
      const ok = outcomes.filter((o) => o.error === undefined);
      for (const o of ok) expect(o.finished).toBe(true);
      expect(ok.filter((o) => o.startedAt < killedAt && o.endedAt > killedAt).length).toBeGreaterThan(0);
      expect(ok.filter((o) => o.startedAt > killedAt).length).toBeGreaterThan(0);

      const metrics = await (await fetch(`${router.url}/metrics`)).text();
      // Requests waiting inside the dead engine (no byte yet) were reset and sent elsewhere.
      expect(metrics).toMatch(/llmgw_router_retries_total\{model="m1",reason="reset"\} [1-9]/);
      expect(router.core.endpoints.get('r0')?.breaker.state).toBe('open');
      expect(router.core.endpoints.get('r0')?.inFlight).toBe(0);
    },
    90_000,
  );
});
