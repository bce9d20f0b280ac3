import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { BreakerState, ScrapeHealth } from '@llmgw/routing';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { RequestObserver, UpstreamFailure } from '../proxy/request.observer';
import type { TokenUsage } from '../tenancy/response-usage';
import type { WatchState } from '../watch/controller.watch';
import { FastCounter, FastHistogram } from './fast-metric';

/** Where the scrape-time gauges read from; set once the parts exist. */
export interface RouterMetricsSources {
  readonly registry: EndpointRegistry;
  /** Requests waiting per model. */
  readonly queueDepths: () => ReadonlyMap<string, number>;
  /** Where the watch stands; undefined when the router has no controller. */
  readonly watch: () => WatchState | undefined;
  readonly clock: { now(): number };
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];
const NO_LABELS: readonly string[] = [];
const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half-open'];
const SCRAPE_HEALTH: readonly ScrapeHealth[] = ['ok', 'suspect', 'unavailable'];

/**
 * Every metric family llmgw-router exports, prefixed `llmgw_router_`. Counters and histograms
 * are updated on the request path; gauges describing state (in-flight, breakers, queues,
 * scrapes, endpoints, watch) are computed from that state when /metrics is scraped, so nothing
 * runs between scrapes and they cannot drift. Unknown values are absent series, never 0.
 */
export class RouterMetrics implements RequestObserver {
  /** Labels: route, model, status. */
  readonly requests: FastCounter;
  /** Labels: route, model. */
  readonly requestDuration: FastHistogram;
  /** Labels: model. */
  readonly timeToFirstByte: FastHistogram;
  /** No labels. */
  readonly overheadSeconds: FastHistogram;
  readonly queueWait: Histogram<'model' | 'outcome'>;
  readonly admissionRejections: Counter<'model' | 'reason'>;
  readonly retries: Counter<'model' | 'reason'>;
  readonly breakerTransitions: Counter<'endpoint' | 'from' | 'to'>;
  /** Labels: model, endpoint. */
  readonly endpointChoices: FastCounter;
  /** Labels: model, result (`hit`: the prefix's home replica; `miss`: any other, or chosen by load). */
  readonly prefixAffinity: FastCounter;
  /** Labels: model. Replicas the load guard passed over. */
  readonly prefixDeflections: FastCounter;
  /** Labels: model. Blocks in the prefix key of each keyed request. */
  readonly prefixDepth: FastHistogram;
  readonly scrapeDuration: Histogram<'engine'>;
  readonly scrapeErrors: Counter<'endpoint' | 'reason'>;
  /** Labels: model. */
  readonly responseBytesTotal: FastCounter;
  /** Tokens the engines' `usage` reported, by model and kind (prompt, completion). */
  readonly tokens: FastCounter;
  readonly keyLimitRefusals: Counter<'reason'>;
  /** Per-key series, filled only with LLMGW_ROUTER_KEY_METRICS (one per key and model). */
  readonly keyRequests: FastCounter;
  readonly keyTokens: FastCounter;
  /** 1 while key limits are enforced per router (limit ÷ routers) because Redis is unreachable. */
  readonly limitsDegraded: Gauge;
  readonly upstreamErrors: Counter<'endpoint' | 'kind'>;
  readonly streamErrors: Counter<'model'>;
  readonly authFailures: Counter<string>;
  readonly httpHandovers: Counter<string>;
  readonly connectionsRefused: Counter<string>;
  readonly watchSnapshots: Counter<'result'>;
  readonly watchReconnects: Counter<string>;
  readonly watchNotLeader: Counter<string>;
  readonly usageReports: Counter<'result'>;
  private sources: RouterMetricsSources | undefined;

  constructor(registers: Registry) {
    const registersList = [registers];
    const src = (): RouterMetricsSources | undefined => this.sources;

    // The families touched by every request are FastCounter/FastHistogram: same exposition, no per-call label hashing.
    this.requests = new FastCounter(
      'llmgw_router_requests_total',
      'Requests answered by the router, by API route, canonical model (empty when unresolved) and HTTP status.',
      ['route', 'model', 'status'],
      registers,
    );
    this.requestDuration = new FastHistogram(
      'llmgw_router_request_duration_seconds',
      'Time from receiving a request to the end of its response, seconds.',
      ['route', 'model'],
      LATENCY_BUCKETS,
      registers,
    );
    this.timeToFirstByte = new FastHistogram(
      'llmgw_router_time_to_first_byte_seconds',
      'Time from receiving a request to the first response byte from the engine, seconds.',
      ['model'],
      LATENCY_BUCKETS,
      registers,
    );
    this.overheadSeconds = new FastHistogram(
      'llmgw_router_overhead_seconds',
      'Time the router itself spent on a request before sending it to an engine (queue wait excluded), seconds.',
      [],
      OVERHEAD_BUCKETS,
      registers,
    );
    this.queueWait = new Histogram({
      name: 'llmgw_router_queue_wait_seconds',
      help: 'Time requests spent in a model queue waiting for a free endpoint, by how the wait ended, seconds.',
      labelNames: ['model', 'outcome'],
      buckets: LATENCY_BUCKETS,
      registers: registersList,
    });
    this.admissionRejections = new Counter({
      name: 'llmgw_router_admission_rejections_total',
      help: 'Requests refused by admission, by reason (queue_full, queue_timeout, no_endpoints).',
      labelNames: ['model', 'reason'],
      registers: registersList,
    });
    this.retries = new Counter({
      name: 'llmgw_router_retries_total',
      help: 'Requests sent again after a failure before the first response byte, by the failure.',
      labelNames: ['model', 'reason'],
      registers: registersList,
    });
    this.breakerTransitions = new Counter({
      name: 'llmgw_router_breaker_transitions_total',
      help: 'Circuit breaker state changes per endpoint.',
      labelNames: ['endpoint', 'from', 'to'],
      registers: registersList,
    });
    this.endpointChoices = new FastCounter('llmgw_router_endpoint_choices_total', 'Requests sent to each endpoint (retries included).', ['model', 'endpoint'], registers);
    this.prefixAffinity = new FastCounter(
      'llmgw_router_prefix_affinity_requests_total',
      "Requests of prefix-affinity models by result: hit = sent to their prefix's home replica; miss = passed on by the load guard or the two choices, or chosen by load (no prompt to key on, every replica saturated); cold = a key this router had not placed lately, sent where its prefill starts soonest.",
      ['model', 'result'],
      registers,
    );
    this.prefixDeflections = new FastCounter(
      'llmgw_router_prefix_affinity_deflections_total',
      "Replicas prefix affinity passed over: by the load guard (at or above a load cap, or saturated), or a key's home passed for its runner-up by the two choices; not a cold key's pick of the freest replica.",
      ['model'],
      registers,
    );
    this.prefixDepth = new FastHistogram(
      'llmgw_router_prefix_affinity_depth_blocks',
      'Blocks of the prompt hashed into the prefix key of each prefix-affinity request.',
      ['model'],
      [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
      registers,
    );
    this.scrapeDuration = new Histogram({
      name: 'llmgw_router_scrape_duration_seconds',
      help: 'Time to scrape one endpoint /metrics, successful or not, seconds.',
      labelNames: ['engine'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: registersList,
    });
    this.scrapeErrors = new Counter({
      name: 'llmgw_router_scrape_errors_total',
      help: 'Failed scrapes of endpoint /metrics, by reason (connect, timeout, status, parse).',
      labelNames: ['endpoint', 'reason'],
      registers: registersList,
    });
    this.responseBytesTotal = new FastCounter('llmgw_router_response_bytes_total', 'Response body bytes streamed from engines to clients.', ['model'], registers);
    this.upstreamErrors = new Counter({
      name: 'llmgw_router_upstream_errors_total',
      help: 'Failed exchanges with engines, by kind (connect, reset, timeout, status_5xx, stream_cut).',
      labelNames: ['endpoint', 'kind'],
      registers: registersList,
    });
    this.streamErrors = new Counter({
      name: 'llmgw_router_stream_errors_total',
      help: 'Responses cut after their first byte: ended with an SSE error event, or closed when not a stream.',
      labelNames: ['model'],
      registers: registersList,
    });
    this.tokens = new FastCounter('llmgw_router_tokens_total', "Tokens the engines' usage reported, by model and kind (prompt, completion); requests with an API key only.", ['model', 'kind'], registers);
    this.keyRequests = new FastCounter('llmgw_router_key_requests_total', 'Requests per API key, model and status; only with LLMGW_ROUTER_KEY_METRICS.', ['key', 'model', 'status'], registers);
    this.keyTokens = new FastCounter('llmgw_router_key_tokens_total', "Tokens per API key, model and kind (prompt, completion) from the engines' usage; only with LLMGW_ROUTER_KEY_METRICS.", ['key', 'model', 'kind'], registers);
    this.keyLimitRefusals = new Counter({
      name: 'llmgw_router_limit_refusals_total',
      help: "Requests refused by their API key's limits, by answer (rate_limit_exceeded, insufficient_quota).",
      labelNames: ['reason'],
      registers: registersList,
    });
    this.limitsDegraded = new Gauge({
      name: 'llmgw_router_limits_degraded',
      help: 'Whether API key limits are enforced by this router alone (each limit divided by the routers the controller counts) because the shared Redis is unreachable.',
      registers: registersList,
    });
    this.authFailures = new Counter({
      name: 'llmgw_router_auth_failures_total',
      help: 'Requests refused for a missing or unknown API key.',
      registers: registersList,
    });
    this.httpHandovers = new Counter({
      name: 'llmgw_router_http_handovers_total',
      help: "Client connections the router's own HTTP/1.1 front end gave to Node's HTTP server, at the first request it does not serve itself (paths outside /v1 such as /metrics, HTTP/1.0, chunked uploads, Expect, anything malformed).",
      registers: registersList,
    });
    this.connectionsRefused = new Counter({
      name: 'llmgw_router_connections_refused_total',
      help: 'Client connections closed as they arrived because LLMGW_ROUTER_MAX_CONNECTIONS were already open.',
      registers: registersList,
    });
    this.watchSnapshots = new Counter({
      name: 'llmgw_router_watch_snapshots_total',
      help: 'Endpoint snapshots received, by result (applied, stale, invalid: a compressed one that did not inflate or decode).',
      labelNames: ['result'],
      registers: registersList,
    });
    this.watchReconnects = new Counter({
      name: 'llmgw_router_watch_reconnects_total',
      help: 'Times the watch stream to the controller was opened again after it ended or failed.',
      registers: registersList,
    });
    this.watchNotLeader = new Counter({
      name: 'llmgw_router_watch_not_leader_total',
      help: 'Times a controller answered the watch that it does not lead (the router then follows the leader it names, or the next address).',
      registers: registersList,
    });
    this.usageReports = new Counter({
      name: 'llmgw_router_usage_reports_total',
      help: 'Replica usage reports sent to the controller, by result (ok, error).',
      labelNames: ['result'],
      registers: registersList,
    });

    new Gauge({
      name: 'llmgw_router_in_flight',
      help: 'Requests this router has sent to each endpoint and not seen finish.',
      labelNames: ['endpoint', 'model'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (s) for (const e of s.registry.active()) this.set({ endpoint: e.id, model: e.endpoint.model }, e.inFlight);
      },
    });
    new Gauge({
      name: 'llmgw_router_queue_depth',
      help: 'Requests waiting in a model queue for a free endpoint.',
      labelNames: ['model'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (s) for (const [model, n] of s.queueDepths()) this.set({ model }, n);
      },
    });
    new Gauge({
      name: 'llmgw_router_breaker_state',
      help: 'Circuit breaker state per endpoint: 1 on the current state, 0 on the others.',
      labelNames: ['endpoint', 'state'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        for (const e of s.registry.active()) {
          const current = e.breaker.state;
          for (const state of BREAKER_STATES) this.set({ endpoint: e.id, state }, state === current ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: 'llmgw_router_scrape_health',
      help: 'What scrapes say of each endpoint (ok; suspect after an unanswered scrape; unavailable after LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER in a row): 1 on the current state, 0 on the others.',
      labelNames: ['endpoint', 'state'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        for (const e of s.registry.active()) {
          const current = e.scrapeHealth;
          for (const state of SCRAPE_HEALTH) this.set({ endpoint: e.id, state }, state === current ? 1 : 0);
        }
      },
    });
    new Gauge({
      name: 'llmgw_router_scorer_value',
      help: 'Each scorer value in [0,1] for an endpoint at its latest choice among several.',
      labelNames: ['endpoint', 'scorer'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        for (const e of s.registry.active()) {
          if (e.lastScores === undefined) continue;
          for (const [scorer, v] of Object.entries(e.lastScores)) this.set({ endpoint: e.id, scorer }, v);
        }
      },
    });
    new Gauge({
      name: 'llmgw_router_scrape_age_seconds',
      help: 'Age of the newest successful scrape per endpoint, seconds; absent when never scraped.',
      labelNames: ['endpoint'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        const now = s.clock.now();
        for (const e of s.registry.active()) if (e.lastScrape) this.set({ endpoint: e.id }, Math.max(0, now - e.lastScrape.at) / 1000);
      },
    });
    new Gauge({
      name: 'llmgw_router_engine_load',
      help: 'Engine load from the newest fresh scrape (running, waiting, kv_usage, capacity); absent when unknown or stale.',
      labelNames: ['endpoint', 'field'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        const now = s.clock.now();
        for (const e of s.registry.active()) {
          const load = e.freshLoad(now);
          if (load?.running !== undefined) this.set({ endpoint: e.id, field: 'running' }, load.running);
          if (load?.waiting !== undefined) this.set({ endpoint: e.id, field: 'waiting' }, load.waiting);
          if (load?.kvUsage !== undefined) this.set({ endpoint: e.id, field: 'kv_usage' }, load.kvUsage);
          if (load?.capacity !== undefined) this.set({ endpoint: e.id, field: 'capacity' }, load.capacity);
        }
      },
    });
    new Gauge({
      name: 'llmgw_router_drain_rate',
      help: 'Measured completions per second per endpoint (EWMA); absent until measured.',
      labelNames: ['endpoint'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        for (const e of s.registry.active()) {
          const r = e.drain.rate();
          if (r !== undefined) this.set({ endpoint: e.id }, r);
        }
      },
    });
    new Gauge({
      name: 'llmgw_router_endpoints',
      help: 'Endpoints the router may send requests to, per canonical model.',
      labelNames: ['model'],
      registers: registersList,
      collect() {
        this.reset();
        const s = src();
        if (!s) return;
        const counts = new Map<string, number>();
        for (const m of s.registry.catalog.models) counts.set(m.name, 0);
        for (const e of s.registry.active()) counts.set(e.endpoint.model, (counts.get(e.endpoint.model) ?? 0) + 1);
        for (const [model, n] of counts) this.set({ model }, n);
      },
    });
    new Gauge({
      name: 'llmgw_router_catalog_models',
      help: 'Models in the router catalog view (aliases not counted).',
      registers: registersList,
      collect() {
        const s = src();
        this.set(s ? s.registry.catalog.models.length : 0);
      },
    });
    new Gauge({
      name: 'llmgw_router_watch_revision',
      help: 'Revision of the endpoint snapshot in use; absent before the first.',
      registers: registersList,
      collect() {
        this.reset();
        const revision = src()?.registry.revision;
        if (revision !== undefined) this.set(revision);
      },
    });
    new Gauge({
      name: 'llmgw_router_watch_connected',
      help: 'Whether the watch stream to the controller is open (1) or not (0); absent without a controller.',
      registers: registersList,
      collect() {
        this.reset();
        const watch = src()?.watch();
        if (watch !== undefined) this.set(watch.connected ? 1 : 0);
      },
    });
    new Gauge({
      name: 'llmgw_router_snapshot_stale_seconds',
      help: 'How long the routing table in use has gone without a live watch stream behind it: 0 while connected; absent without a controller or before the first snapshot.',
      registers: registersList,
      collect() {
        this.reset();
        const staleMs = src()?.watch()?.staleMs;
        if (staleMs !== undefined) this.set(staleMs / 1000);
      },
    });
  }

  // The request path's events (RequestObserver).
  authFailed(): void {
    this.authFailures.inc();
  }

  answered(route: string, model: string, status: number, seconds: number): void {
    this.requests.inc([route, model, String(status)]);
    this.requestDuration.observe([route, model], seconds);
  }

  responseBytes(model: string, bytes: number): void {
    this.responseBytesTotal.inc([model], bytes);
  }

  keyAnswered(key: string, model: string, status: number): void {
    this.keyRequests.inc([key, model, String(status)]);
  }

  tokensUsed(model: string, usage: TokenUsage, key: string | undefined): void {
    this.tokens.inc([model, 'prompt'], usage.promptTokens);
    this.tokens.inc([model, 'completion'], usage.completionTokens);
    if (key === undefined) return;
    this.keyTokens.inc([key, model, 'prompt'], usage.promptTokens);
    this.keyTokens.inc([key, model, 'completion'], usage.completionTokens);
  }

  keyLimitRefused(reason: string): void {
    this.keyLimitRefusals.inc({ reason });
  }

  overhead(seconds: number): void {
    this.overheadSeconds.observe(NO_LABELS, seconds);
  }

  endpointChosen(model: string, endpointId: string): void {
    this.endpointChoices.inc([model, endpointId]);
  }

  firstByte(model: string, seconds: number): void {
    this.timeToFirstByte.observe([model], seconds);
  }

  retried(model: string, reason: UpstreamFailure): void {
    this.retries.inc({ model, reason });
  }

  upstreamFailed(endpointId: string, kind: UpstreamFailure): void {
    this.upstreamErrors.inc({ endpoint: endpointId, kind });
  }

  streamCut(model: string): void {
    this.streamErrors.inc({ model });
  }

  /** Connects the scrape-time gauges to the router's state. */
  attach(sources: RouterMetricsSources): void {
    this.sources = sources;
  }

  /**
   * Forgets every series labelled with replica `replicaId` in the endpoint-labelled counters
   * (choices, upstream errors, breaker transitions, scrape errors), for an endpoint that is
   * gone for good. The scrape-time gauges need nothing: they only ever show listed endpoints.
   * Resolves once the prom-client counters have dropped theirs.
   */
  async forgetEndpoint(replicaId: string): Promise<void> {
    const labels = { endpoint: replicaId };
    this.endpointChoices.removeMatching(labels);
    await Promise.all([this.upstreamErrors, this.breakerTransitions, this.scrapeErrors].map((counter) => removeMatching(counter, labels)));
  }
}

/**
 * Removes every series of a prom-client counter whose labels include all of `labels`
 * (prom-client's own `remove` needs every label value). Without a collect function, `get()`
 * lists the series when called; its promise only carries the list.
 */
async function removeMatching<T extends string>(counter: Counter<T>, labels: Readonly<Partial<Record<T, string>>>): Promise<void> {
  const wanted = Object.entries(labels);
  for (const series of (await counter.get()).values) {
    const have: Readonly<Partial<Record<string, string | number>>> = series.labels;
    if (wanted.every(([name, value]) => have[name] === value)) counter.remove(series.labels);
  }
}
