import type { Clock, Endpoint, EngineLoad, MetricMapping } from '@llmgw/domain';
import { CircuitBreaker, DrainRate, guardLoad, LoadAverage, scrapeHealth, type BreakerOptions, type BreakerTransition, type Candidate, type ScrapeHealth } from '@llmgw/routing';

/** Where requests for an endpoint go, parsed once from its URL. */
export interface EndpointTarget {
  readonly hostname: string;
  readonly port: number;
  /** Path prefix of the engine's API without a trailing slash ('' for the root). */
  readonly basePath: string;
  /** `host:port` as sent in the Host header. */
  readonly host: string;
  /** `hostname:port`: names the engine's pool of connections. */
  readonly key: string;
}

/** One successful scrape: the engine's load, when it was read (ms since epoch) and this router's in-flight count then (see inFlight). */
export interface ScrapeReading {
  readonly load: EngineLoad;
  readonly at: number;
  /**
   * The most requests this router had in flight on the endpoint while the scrape was out (see
   * EndpointState.scrapeStarted). The engine's figures are from some moment between sending the
   * scrape and its answer, and at any moment the engine holds no more of this router's requests
   * than the router has in flight (it gets a request after the router sends it and ends it
   * before the router sees the end). So the scraped figures minus this are at most what other
   * routers had there, and the estimates (libs/routing estimatedLoad) do not count this router's
   * own requests twice. The count when the answer arrived instead lets a request that ended at
   * the engine before the scrape read and at the router after the answer count as ended twice,
   * and a replica whose requests keep ending and being replaced read lower than it ran.
   */
  readonly inFlight: number;
}

/** A candidate the picker returns, carrying the live state it was built from. */
export interface RoutedCandidate extends Candidate {
  readonly state: EndpointState;
}

/** Parses an engine base URL (`http://host:port[/prefix]`); throws with the reason when it is not one. */
export function parseTarget(url: string): EndpointTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`not an absolute URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:') throw new Error(`only http:// engine URLs are supported, got ${JSON.stringify(url)}`);
  if (parsed.search !== '' || parsed.hash !== '') throw new Error(`engine URL must not carry a query or fragment: ${JSON.stringify(url)}`);
  const port = parsed.port === '' ? 80 : Number(parsed.port);
  const hostname = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
  return { hostname, port, basePath: parsed.pathname.replace(/\/+$/, ''), host: parsed.host, key: `${hostname}:${port}` };
}

/** Options every endpoint's live state is built with. */
export interface EndpointStateOptions {
  readonly clock: Clock;
  readonly breaker: BreakerOptions;
  /** A scrape older than this (ms) is not used: the endpoint is judged by local in-flight only. */
  readonly scrapeStaleAfterMs: number;
  /** Consecutive failed scrapes (no connection, no answer in time) that make the endpoint unavailable. */
  readonly scrapeUnavailableAfter: number;
  readonly onBreakerTransition?: (state: EndpointState, transition: BreakerTransition) => void;
  /** Called when the last in-flight request of an endpoint already marked removed finishes. */
  readonly onDrained?: (state: EndpointState) => void;
}

/**
 * The router's live knowledge of one endpoint: in-flight count, last use, breaker, drain rate
 * and last scrape. Kept across snapshots for as long as the endpoint (same replica id, URL and
 * engine) stays listed, so a replica that keeps serving never starts cold.
 */
export class EndpointState {
  /** Requests this router sent and has not seen finish. */
  inFlight = 0;
  /** Of those, the ones with no response body yet (queued or in prefill on the engine). */
  awaitingOutput = 0;
  /** Last time a request was sent here (ms since epoch); undefined = not used since this router started. */
  lastUsedAt: number | undefined;
  /** Set when a snapshot no longer lists the endpoint: it takes no new requests; in-flight ones finish. */
  removed = false;
  readonly breaker: CircuitBreaker;
  readonly drain: DrainRate;
  /** Newest successful scrape; kept when later scrapes fail, but judged stale by age. */
  lastScrape: ScrapeReading | undefined;
  /** When the newest scrape attempt finished and whether it failed. */
  lastScrapeError: string | undefined;
  /** /slots answered 404 or 501 (llama-server --no-slots): not asked again while this endpoint is listed. */
  noSlots = false;
  /** Why the newest /slots read failed; undefined when it answered (or was never asked). */
  lastSlotsError: string | undefined;
  /** Scrapes in a row that got no answer (connection failed or timed out); any answer resets it. */
  scrapeFailures = 0;
  /** A scrape of this endpoint is running (never two at once); set by scrapeStarted. */
  scraping = false;
  /** The most requests in flight here since the newest scrape was sent (see ScrapeReading.inFlight). */
  inFlightPeak = 0;
  /** Each scorer's value for this endpoint at its last choice (for /metrics). */
  lastScores: Readonly<Record<string, number>> | undefined;
  /** Canonical model names this endpoint serves. */
  models: readonly string[];
  /** The prefix-affinity guard's load here over the last seconds, set at every change of it this router sees. */
  private readonly loadAverage = new LoadAverage();

  constructor(
    public endpoint: Endpoint,
    readonly target: EndpointTarget,
    public mapping: MetricMapping,
    private readonly options: EndpointStateOptions,
  ) {
    this.models = [endpoint.model];
    this.breaker = new CircuitBreaker(options.clock, options.breaker, (t) => options.onBreakerTransition?.(this, t));
    this.drain = new DrainRate(options.clock);
  }

  get id(): string {
    return this.endpoint.replicaId;
  }

  /** Takes the newer description of the same endpoint (suspect flag, mapping), keeping live state. */
  update(endpoint: Endpoint, mapping: MetricMapping): void {
    this.endpoint = endpoint;
    this.mapping = mapping;
    if (this.models[0] !== endpoint.model) this.models = [endpoint.model];
  }

  /** The engine load from a scrape no older than the stale bound, else undefined (unknown, never idle). */
  freshLoad(now: number): EngineLoad | undefined {
    const s = this.lastScrape;
    return s !== undefined && now - s.at <= this.options.scrapeStaleAfterMs ? s.load : undefined;
  }

  /** The candidate's view of the newest fresh scrape: its load, the in-flight count it was read at and the engine's capacity; nothing when stale. */
  private freshScrape(now: number): Pick<Candidate, 'load' | 'inFlightAtScrape' | 'maxRunning'> {
    const s = this.lastScrape;
    if (s === undefined || now - s.at > this.options.scrapeStaleAfterMs) return {};
    return { load: s.load, inFlightAtScrape: s.inFlight, ...(s.load.capacity === undefined ? {} : { maxRunning: s.load.capacity }) };
  }

  /** What the scrapes say of this endpoint now (ok, suspect, unavailable). */
  get scrapeHealth(): ScrapeHealth {
    return scrapeHealth(this.scrapeFailures, { unavailableAfter: this.options.scrapeUnavailableAfter });
  }

  /** What the picker sees of this endpoint now. */
  candidate(now: number): RoutedCandidate {
    const breaker = this.breaker.state;
    return {
      id: this.endpoint.replicaId,
      models: this.models,
      suspect: this.endpoint.suspect,
      draining: this.removed,
      breaker,
      probeAvailable: breaker === 'half-open' && this.breaker.available,
      inFlight: this.inFlight,
      awaitingOutput: this.awaitingOutput,
      averageLoad: this.loadAverage.read(now),
      ...this.freshScrape(now),
      scrapeHealth: this.scrapeHealth,
      state: this,
    };
  }

  /** The guard's load changed (a request sent, answered or finished, a scrape read): the average takes the new value from now. */
  private loadChanged(): void {
    const now = this.options.clock.now();
    this.loadAverage.set(now, guardLoad({ inFlight: this.inFlight, awaitingOutput: this.awaitingOutput, ...this.freshScrape(now) }));
  }

  /** A scrape of this endpoint is sent: it is running, and the peak in-flight count starts from now (see ScrapeReading.inFlight). */
  scrapeStarted(): void {
    this.scraping = true;
    this.inFlightPeak = this.inFlight;
  }

  /** A scrape answered: its reading becomes the endpoint's newest. */
  recordScrape(reading: ScrapeReading): void {
    this.lastScrape = reading;
    this.loadChanged();
  }

  /** A request is sent here: in-flight (and its peak) and awaiting-output +1, last-used = now, a half-open breaker's probe taken. */
  acquire(now: number): void {
    this.inFlight++;
    if (this.inFlight > this.inFlightPeak) this.inFlightPeak = this.inFlight;
    this.awaitingOutput++;
    this.lastUsedAt = now;
    this.breaker.onAcquire();
    this.loadChanged();
  }

  /** A request sent here had its first response body: it no longer waits for output. Once per request (see EndpointLease). */
  outputStarted(): void {
    this.awaitingOutput--;
    this.loadChanged();
  }

  /**
   * A request sent here finished: in-flight −1 (awaiting-output too unless `hadOutput`, i.e.
   * outputStarted was called for it) and its verdict recorded. `success`/`failure`
   * feed the breaker; `abandoned` (the client left) frees a probe without a verdict. Every
   * finished request counts towards the drain rate. The last one on a removed endpoint calls
   * `onDrained`, after the breaker has seen it.
   */
  release(outcome: 'success' | 'failure' | 'abandoned', hadOutput = false): void {
    this.inFlight--;
    if (!hadOutput) this.awaitingOutput--;
    if (outcome === 'success') this.breaker.onSuccess();
    else if (outcome === 'failure') this.breaker.onFailure();
    else this.breaker.onAbandon();
    this.drain.record();
    this.loadChanged();
    if (this.removed && this.inFlight === 0) this.options.onDrained?.(this);
  }
}
