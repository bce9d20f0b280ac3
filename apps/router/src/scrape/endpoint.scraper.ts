import { Agent, request } from 'node:http';
import type { Clock, EngineLoad } from '@llmgw/domain';
import { parseLlamaSlots, readLoad, wantsSlots, withSlots } from '@llmgw/metrics-mappings';
import type { Logger } from 'pino';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { EndpointState } from '../endpoints/endpoint.state';
import type { RouterMetrics } from '../metrics/router.metrics';

/** Scrape settings; times in milliseconds. */
export interface ScraperOptions {
  readonly intervalMs: number;
  /** One scrape's GET (/metrics, and /slots where read) may take this long; past it the scrape fails (reason `timeout`). */
  readonly timeoutMs: number;
}

/** Largest /metrics or /slots body read; a larger one fails the scrape rather than filling memory. */
const MAX_SCRAPE_BYTES = 8 * 1024 * 1024;

type ScrapeFailure = 'connect' | 'timeout' | 'status' | 'parse' | 'too_large';

/** HTTP statuses of a /slots that is not there: llama-server started with --no-slots (501) or a build without it (404). */
const NO_SLOTS: ReadonlySet<number> = new Set([404, 501]);

/** Failures that mean the engine did not answer at all (gone or frozen); the others came from an engine that answered. */
const UNANSWERED: ReadonlySet<ScrapeFailure> = new Set(['connect', 'timeout']);

/**
 * Scrapes every listed endpoint's `/metrics` on an interval (new endpoints at once) and reads
 * the engine's load with the endpoint's metric mapping. A failed scrape keeps nothing new: the
 * previous reading ages out after the stale bound and the picker falls back to the router's own
 * in-flight count — a failed scrape never reads as an idle engine.
 *
 * Scrapes are also the router's liveness check: each one that gets no answer (connection failed,
 * or nothing within the timeout) counts against the endpoint — suspect after one, unavailable
 * after `scrapeUnavailableAfter` in a row (see scrapeHealth in @llmgw/routing); any answer, even
 * a bad one, clears the count, since the engine is evidently running.
 *
 * llama.cpp endpoints whose /metrics reading has no KV usage (current llama-server builds) are
 * also asked `GET /slots` (see wantsSlots/withSlots in @llmgw/metrics-mappings): it gives the
 * engine's capacity (its slot count) and, where /metrics had none, its running count. /slots is
 * an extra: a 404/501 there (started with --no-slots) marks the endpoint as having none and it
 * is not asked again while listed; any other failure keeps the /metrics reading, is logged once
 * and counted as scrape error reason `slots`. Neither touches scrape health.
 */
export class EndpointScraper {
  private timer: NodeJS.Timeout | undefined;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1, maxFreeSockets: 1 });

  constructor(
    private readonly registry: EndpointRegistry,
    private readonly clock: Clock,
    private readonly options: ScraperOptions,
    private readonly metrics: RouterMetrics,
    private readonly logger: Logger,
    /** Called after each successful scrape (admission re-checks the model's queue). */
    private readonly onReading: (state: EndpointState) => void,
  ) {
    registry.onSnapshot((result) => {
      if (this.timer === undefined) return;
      for (const id of result.added) {
        const state = registry.get(id);
        if (state) void this.scrape(state);
      }
    });
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.tick(), this.options.intervalMs);
    this.timer.unref();
    this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.agent.destroy();
  }

  /** Starts a scrape of every listed endpoint not already being scraped. */
  tick(): void {
    for (const state of this.registry.active()) if (!state.scraping) void this.scrape(state);
  }

  /** Scrapes one endpoint and records the reading or the failure; never throws. */
  async scrape(state: EndpointState): Promise<void> {
    if (state.scraping) return;
    state.scrapeStarted();
    const started = performance.now();
    try {
      const text = await this.fetchText(state, '/metrics', 'text/plain');
      let load = readLoad(text, state.mapping, { modelName: state.endpoint.model });
      if (!state.noSlots && wantsSlots(state.endpoint.engine, load)) load = await this.addSlots(state, load);
      if (state.removed) return;
      state.recordScrape({ load, at: this.clock.now(), inFlight: state.inFlightPeak });
      state.lastScrapeError = undefined;
      this.countFailures(state, false);
      this.onReading(state);
    } catch (error) {
      // A removed endpoint's series may already be forgotten: its failing last scrape (likely,
      // as the replica is going away) must not bring them back.
      if (state.removed) return;
      const reason: ScrapeFailure = error instanceof ScrapeError ? error.reason : 'parse';
      const message = error instanceof Error ? error.message : String(error);
      if (state.lastScrapeError === undefined) this.logger.warn({ replicaId: state.id, reason, err: message }, 'endpoint scrape failed');
      state.lastScrapeError = message;
      this.metrics.scrapeErrors.inc({ endpoint: state.id, reason });
      // Requests queued for this model may now go elsewhere (or, past the last resort, be refused).
      if (this.countFailures(state, UNANSWERED.has(reason))) this.onReading(state);
    } finally {
      state.scraping = false;
      this.metrics.scrapeDuration.observe({ engine: state.endpoint.engine }, (performance.now() - started) / 1000);
    }
  }

  /** `load` with the endpoint's /slots figures added; `load` as it was when /slots fails or is not there. Never throws. */
  private async addSlots(state: EndpointState, load: EngineLoad): Promise<EngineLoad> {
    const fields = { replicaId: state.id, model: state.endpoint.model };
    try {
      const slots = parseLlamaSlots(await this.fetchText(state, '/slots', 'application/json'));
      if (state.lastSlotsError !== undefined) this.logger.info(fields, 'endpoint /slots answers again');
      state.lastSlotsError = undefined;
      return withSlots(load, slots);
    } catch (error) {
      if (state.removed) return load;
      if (error instanceof ScrapeError && error.status !== undefined && NO_SLOTS.has(error.status)) {
        state.noSlots = true;
        this.logger.info({ ...fields, status: error.status }, 'endpoint has no /slots (llama-server --no-slots?): its load comes from /metrics alone');
        return load;
      }
      const message = error instanceof Error ? error.message : String(error);
      if (state.lastSlotsError === undefined) this.logger.warn({ ...fields, err: message }, 'endpoint /slots failed; keeping its /metrics reading');
      state.lastSlotsError = message;
      this.metrics.scrapeErrors.inc({ endpoint: state.id, reason: 'slots' });
      return load;
    }
  }

  /** Updates the endpoint's run of unanswered scrapes; logs and returns true when its scrape health changed. */
  private countFailures(state: EndpointState, unanswered: boolean): boolean {
    const before = state.scrapeHealth;
    state.scrapeFailures = unanswered ? state.scrapeFailures + 1 : 0;
    const after = state.scrapeHealth;
    if (after === before) return false;
    const fields = { replicaId: state.id, model: state.endpoint.model, from: before, to: after, failures: state.scrapeFailures };
    if (after === 'unavailable') this.logger.warn(fields, 'endpoint unavailable: its scrapes get no answer');
    else this.logger.info(fields, `endpoint scrape health ${after}`);
    return true;
  }

  /** GETs `path` under the endpoint's base path: the body as text, or a ScrapeError (size-capped, timed out after `timeoutMs`). */
  private fetchText(state: EndpointState, path: '/metrics' | '/slots', accept: string): Promise<string> {
    const t = state.target;
    return new Promise((resolve, reject) => {
      let settled = false;
      const timing: { timer?: NodeJS.Timeout } = {};
      const fail = (reason: ScrapeFailure, message: string, status?: number): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timing.timer);
        req.destroy();
        reject(new ScrapeError(reason, message, status));
      };
      const req = request(
        { agent: this.agent, host: t.hostname, port: t.port, path: `${t.basePath}${path}`, method: 'GET', headers: { accept } },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            fail('status', `GET ${path} answered HTTP ${res.statusCode}`, res.statusCode);
            return;
          }
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_SCRAPE_BYTES) fail('too_large', `${path} is larger than ${MAX_SCRAPE_BYTES} bytes`);
            else chunks.push(chunk);
          });
          res.on('end', () => {
            if (settled) return;
            settled = true;
            clearTimeout(timing.timer);
            resolve(Buffer.concat(chunks, size).toString('utf8'));
          });
          res.on('error', (e) => fail('connect', e.message));
        },
      );
      timing.timer = setTimeout(() => fail('timeout', `no complete answer within ${this.options.timeoutMs} ms`), this.options.timeoutMs);
      req.on('error', (e) => fail('connect', e.message));
      req.end();
    });
  }
}

class ScrapeError extends Error {
  constructor(
    readonly reason: ScrapeFailure,
    message: string,
    /** The HTTP status, for reason `status`. */
    readonly status?: number,
  ) {
    super(message);
  }
}
