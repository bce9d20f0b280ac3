// The scraper against real HTTP: a stub engine on port 0 answers /metrics and /slots as told.
// Scrapes are started by the test (the scraper's timer never runs), so every count is exact.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EngineKind } from '@llmgw/domain';
import { FakeClock, fixturePath } from '@llmgw/testing';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { EndpointState } from '../endpoints/endpoint.state';
import { RouterMetrics } from '../metrics/router.metrics';
import { EndpointScraper } from './endpoint.scraper';

const fixture = (name: string): string => readFileSync(fixturePath('llamacpp', name), 'utf8');
/** Real llama-server /metrics of a build without the KV gauges (and cut before requests_processing). */
const LLAMA_METRICS_NO_KV = fixture('llama_server_metrics_excerpt.prom');
/** llama.cpp's README /slots example: 2 slots, both busy. */
const SLOTS_2_BUSY = fixture('llama_server_slots_readme_2_busy.json.txt').replace(/^\/\/ source:[^\n]*\n/, '');
const LLAMA_PROCESSING_1 = '# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n';
const LLAMA_WITH_KV = `${LLAMA_PROCESSING_1}# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio 0.25\n`;
const VLLM_METRICS = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n';

/** An answer: status and body, or `hang` (never answers). */
type Answer = { status: number; body: string } | 'hang';
const ok = (body: string): Answer => ({ status: 200, body });

/** A stub engine: answers each path as `answers` says now; counts the GETs per path. */
class StubEngine {
  readonly hits = new Map<string, number>();
  private readonly server: Server;
  constructor(public answers: Record<string, Answer>) {
    this.server = createServer((req, res) => {
      const path = req.url ?? '/';
      this.hits.set(path, (this.hits.get(path) ?? 0) + 1);
      const a = this.answers[path] ?? { status: 404, body: 'not found' };
      if (a === 'hang') return;
      res.writeHead(a.status, { 'content-type': 'text/plain' }).end(a.body);
    });
  }
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  count(path: string): number {
    return this.hits.get(path) ?? 0;
  }
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A scraper over one endpoint `e1` of `engine` served by a stub answering `answers`; logs kept in `logs`. */
async function setup(engine: EngineKind, answers: Record<string, Answer>) {
  const stub = new StubEngine(answers);
  const url = await stub.start();
  const registry = new EndpointRegistry({ clock: new FakeClock(), breaker: { failureThreshold: 2, cooldownMs: 1_000 }, scrapeStaleAfterMs: 3_000, scrapeUnavailableAfter: 3 });
  const snapshot = (revision: number, listed: boolean) => ({
    revision,
    endpoints: listed ? [{ replicaId: 'e1', model: 'm', url, engine, nodeId: 'n1', suspect: false }] : [],
    catalog: { revision: 1, models: [{ name: 'm', aliases: [], engine }] },
  });
  registry.apply(snapshot(1, true), { resync: true });
  const metrics = new RouterMetrics(new Registry());
  const logs: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as { level: number; msg: string }) });
  const scraper = new EndpointScraper(registry, new FakeClock(), { intervalMs: 60_000, timeoutMs: 300 }, metrics, logger, () => undefined);
  cleanups.push(() => scraper.stop(), () => stub.close());
  const state = (): EndpointState => {
    const s = registry.get('e1');
    if (s === undefined) throw new Error('e1 not listed');
    return s;
  };
  const scrape = (): Promise<void> => scraper.scrape(state());
  const slotsErrors = async (): Promise<number> =>
    (await metrics.scrapeErrors.get()).values.filter((v) => v.labels.reason === 'slots').reduce((sum, v) => sum + v.value, 0);
  const allErrors = async (): Promise<number> => (await metrics.scrapeErrors.get()).values.reduce((sum, v) => sum + v.value, 0);
  return { stub, registry, snapshot, state, scrape, logs, slotsErrors, allErrors };
}

describe('EndpointScraper: what the router had in flight at a scrape', () => {
  it('records the most requests in flight while the scrape was out, not the count when its answer came', async () => {
    const t = await setup('vllm', { '/metrics': ok(VLLM_METRICS) });
    const s = t.state();
    s.acquire(0);
    const first = t.scrape();
    // While the scrape is out: two more sent, then two finish (the engine read its figures at
    // some moment in between and may have counted any of them).
    s.acquire(0);
    s.acquire(0);
    s.release('success');
    s.release('success');
    await first;
    expect([s.lastScrape?.load.running, s.lastScrape?.inFlight, s.inFlight]).toEqual([3, 3, 1]);
    // The next scrape starts from the count when it is sent.
    await t.scrape();
    expect(s.lastScrape?.inFlight).toBe(1);
  });
});

describe('EndpointScraper and llama-server /slots', () => {
  it('reads running and capacity from /slots when /metrics has neither KV usage nor running (current builds)', async () => {
    const t = await setup('llamacpp', { '/metrics': ok(LLAMA_METRICS_NO_KV), '/slots': ok(SLOTS_2_BUSY) });
    await t.scrape();
    expect(t.state().lastScrape?.load).toEqual({ running: 2, capacity: 2 });
    expect([t.state().scrapeHealth, t.state().lastScrapeError, t.stub.count('/slots')]).toEqual(['ok', undefined, 1]);
  });

  it("keeps /metrics' running and takes only the capacity from /slots", async () => {
    const t = await setup('llamacpp', { '/metrics': ok(LLAMA_PROCESSING_1), '/slots': ok(SLOTS_2_BUSY) });
    await t.scrape();
    expect(t.state().lastScrape?.load).toEqual({ running: 1, waiting: 0, capacity: 2 });
  });

  it.each([
    ['llama.cpp with the KV gauge (older builds)', 'llamacpp', LLAMA_WITH_KV, { running: 1, waiting: 0, kvUsage: 0.25 }],
    ['vLLM', 'vllm', VLLM_METRICS, { running: 3 }],
  ] as const)('does not ask /slots of %s', async (_name, engine, text, load) => {
    const t = await setup(engine, { '/metrics': ok(text), '/slots': ok(SLOTS_2_BUSY) });
    await t.scrape();
    expect(t.state().lastScrape?.load).toEqual(load);
    expect(t.stub.count('/slots')).toBe(0);
  });

  it.each([404, 501])(
    'a /slots answering %d (--no-slots) is remembered: not asked again, no scrape error, health ok; asked again once re-added',
    async (status) => {
      const t = await setup('llamacpp', {
        '/metrics': ok(LLAMA_PROCESSING_1),
        '/slots': { status, body: '{"error":{"code":501,"message":"This server does not support slots endpoint. Start it with `--slots`","type":"not_supported_error"}}' },
      });
      await t.scrape();
      await t.scrape();
      expect(t.state().lastScrape?.load).toEqual({ running: 1, waiting: 0 });
      expect([t.state().noSlots, t.state().scrapeHealth, t.state().lastScrapeError, await t.allErrors()]).toEqual([true, 'ok', undefined, 0]);
      expect(t.stub.count('/slots')).toBe(1);
      expect(t.logs.filter((l) => l.msg.includes('has no /slots'))).toHaveLength(1);

      t.registry.apply(t.snapshot(2, false), { resync: false });
      t.registry.apply(t.snapshot(3, true), { resync: false });
      t.stub.answers['/slots'] = ok(SLOTS_2_BUSY);
      await t.scrape();
      expect(t.stub.count('/slots')).toBe(2);
      expect(t.state().lastScrape?.load).toEqual({ running: 1, waiting: 0, capacity: 2 });
    },
  );

  it.each([
    ['HTTP 500', { status: 500, body: 'boom' }],
    ['HTTP 401 (an --api-key server)', { status: 401, body: '{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}' }],
    ['not JSON', ok('<html>proxy error</html>')],
    ['JSON that is not a slot list', ok('{"slots":4}')],
    ['larger than the size cap', ok(`[${'{"id":0,"is_processing":false},'.repeat(300_000)}{"id":0,"is_processing":false}]`)],
    ['no answer in time', 'hang' as const],
  ])('a /slots failing with %s keeps the /metrics reading, counts reason slots, logs once, leaves health alone', async (_name, answer) => {
    const t = await setup('llamacpp', { '/metrics': ok(LLAMA_PROCESSING_1), '/slots': answer });
    await t.scrape();
    await t.scrape();
    expect(t.state().lastScrape?.load).toEqual({ running: 1, waiting: 0 });
    expect([t.state().noSlots, t.state().scrapeHealth, t.state().scrapeFailures, t.state().lastScrapeError]).toEqual([false, 'ok', 0, undefined]);
    expect(t.state().lastSlotsError).toBeDefined();
    expect([await t.slotsErrors(), await t.allErrors()]).toEqual([2, 2]);
    expect(t.logs.filter((l) => l.msg.includes('/slots failed'))).toHaveLength(1);
    expect(t.stub.count('/slots')).toBe(2);

    t.stub.answers['/slots'] = ok(SLOTS_2_BUSY);
    await t.scrape();
    expect(t.state().lastScrape?.load).toEqual({ running: 1, waiting: 0, capacity: 2 });
    expect(t.state().lastSlotsError).toBeUndefined();
    expect(t.logs.filter((l) => l.msg.includes('/slots answers again'))).toHaveLength(1);
  });

  it('a failed /metrics scrape does not ask /slots', async () => {
    const t = await setup('llamacpp', { '/metrics': { status: 503, body: 'Loading model' }, '/slots': ok(SLOTS_2_BUSY) });
    await t.scrape();
    expect([t.state().lastScrape, t.stub.count('/slots'), await t.slotsErrors(), await t.allErrors()]).toEqual([undefined, 0, 0, 1]);
  });
});
