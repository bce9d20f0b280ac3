import { hostname } from 'node:os';
import { systemClock, type Clock, type EndpointSnapshot, type ManagedKey, type Rng } from '@llmgw/domain';
import type { RouterServiceClient } from '@llmgw/proto';
import { buildScorers, EndpointPicker } from '@llmgw/routing';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import Redis from 'ioredis';
import { MemoryLimiter, RedisLimiter, SharedLimiter } from '@llmgw/limits';
import { AdmissionService } from './admission/admission.service';
import { deflections } from './admission/endpoint.lease';
import { ApiKeyAuthenticator, loadApiKeysFile } from './auth/api-key.authenticator';
import type { RouterConfig } from './config/router.config';
import { EndpointRegistry } from './endpoints/endpoint.registry';
import { RouterMetrics } from './metrics/router.metrics';
import { EnginePool, type ApiHandler } from './http1';
import { ProxyHandler } from './proxy/proxy.handler';
import { EndpointScraper } from './scrape/endpoint.scraper';
import { loadStaticConfig } from './static/static-config.parser';
import { GrpcUsageSink } from './usage/grpc-usage.sink';
import { UsageReporter } from './usage/usage.reporter';
import type { UsageSink } from './usage/usage.sink';
import { controllerClientFactory, type ControllerClientFactory } from './watch/controller.clients';
import { ControllerWatch } from './watch/controller.watch';
import { InProcessFeed, type SnapshotSource } from './watch/in-process.feed';
import { KeyLimitsStage } from './tenancy/key-limits.stage';
import { KeyUsageTally } from './usage/key-usage.tally';

/** What the router core is built from. Clock, randomness and the usage sink may be replaced in tests. */
export interface RouterCoreDeps {
  readonly config: RouterConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly clock?: Clock;
  readonly rng?: Rng;
  /** Where usage reports go; default: the controller over gRPC when one is configured, else nowhere. */
  readonly usageSink?: UsageSink;
  /** The Redis client for key limits; default: one connected to LLMGW_REDIS_URL when it is set. */
  readonly redis?: Redis;
  /** Makes the RouterService client for a controller address; default: per LLMGW_GRPC_* (watch/controller.clients.ts). */
  readonly createClient?: ControllerClientFactory;
  /**
   * Endpoint snapshots from a controller in this process (its `EndpointPublisher.attach`), in
   * place of the watch stream; then no controller address may be configured.
   */
  readonly snapshots?: SnapshotSource;
}

const systemRng: Rng = { next: () => Math.random() };

/**
 * The router without its web framework: endpoint registry, picker, admission, proxy, scraper,
 * watch stream and usage reporter, wired from the config. Loads the static config and API keys
 * files at construction (a bad file refuses to start, naming every problem). `start()` begins
 * the background work; `handle` serves `/v1/*`.
 */
export class RouterCore {
  readonly endpoints: EndpointRegistry;
  readonly admission: AdmissionService;
  readonly metrics: RouterMetrics;
  readonly proxy: ProxyHandler;
  readonly scraper: EndpointScraper;
  readonly watch: ControllerWatch | undefined;
  /** The in-process snapshot feed, when a controller in this process publishes to this router. */
  readonly feed: InProcessFeed | undefined;
  readonly usage: UsageReporter | undefined;
  readonly routerId: string;
  private readonly pool: EnginePool;
  /** One gRPC client per controller address, made when first needed. */
  private readonly clients = new Map<string, RouterServiceClient>();
  private readonly seed: EndpointSnapshot | undefined;
  private readonly logger: Logger;
  private started = false;
  private readonly auth: ApiKeyAuthenticator;
  private readonly redis: Redis | undefined;
  /** Admits requests against their key's limits (see KeyLimitsStage). */
  readonly limiter: SharedLimiter;
  /** Whether key limits are shared across routers through Redis (LLMGW_REDIS_URL). */
  get sharedLimits(): boolean {
    return this.redis !== undefined;
  }
  private readonly keyLimits: KeyLimitsStage;
  private readonly leaseRenewMs: number;
  /** Tokens of keyed requests, reported to the controller with the usage reports. */
  private readonly keyUsage = new KeyUsageTally();
  private renewTimer: NodeJS.Timeout | undefined;
  /** Routers watching the controller, as its last snapshot said (each router's share of a limit without Redis). */
  private fleetRouters = 1;

  constructor(deps: RouterCoreDeps) {
    const { config } = deps;
    const clock = deps.clock ?? systemClock;
    const rng = deps.rng ?? systemRng;
    this.logger = deps.logger.child({ context: 'RouterCore' });
    this.routerId = config.routerId ?? `${hostname()}-${process.pid}`;
    this.seed = config.configFile !== undefined ? loadStaticConfig(config.configFile) : undefined;
    // Keys from the static file, and those the controller manages once it sends any.
    const auth = new ApiKeyAuthenticator(config.apiKeysFile !== undefined ? loadApiKeysFile(config.apiKeysFile) : [], clock);
    this.auth = auth;

    this.metrics = new RouterMetrics(deps.registry);
    const breakerLog = deps.logger.child({ context: 'CircuitBreaker' });
    this.endpoints = new EndpointRegistry({
      clock,
      breaker: config.breaker,
      scrapeStaleAfterMs: config.scrape.staleAfterMs,
      scrapeUnavailableAfter: config.scrape.unavailableAfter,
      onBreakerTransition: (state, t) => {
        this.metrics.breakerTransitions.inc({ endpoint: state.id, from: t.from, to: t.to });
        const level = t.to === 'open' ? 'warn' : 'info';
        breakerLog[level]({ replicaId: state.id, model: state.endpoint.model, from: t.from, to: t.to }, `circuit breaker ${t.to}`);
      },
      // A replica gone for good takes its counter series along: ids never repeat across rebuilds.
      onGone: (replicaId) => void this.metrics.forgetEndpoint(replicaId),
    });
    const picker = new EndpointPicker(buildScorers(config.scorerWeights), rng);
    this.admission = new AdmissionService(this.endpoints, picker, clock, config.admission, {
      queued: (model, waited, outcome) => this.metrics.queueWait.observe({ model, outcome }, waited),
      refused: (model, reason) => this.metrics.admissionRejections.inc({ model, reason }),
      chose: (model, _state, reason) => {
        if (reason.policy === 'prefix-affinity') {
          this.metrics.prefixAffinity.inc([model, reason.cold === true ? 'cold' : reason.rank === 0 ? 'hit' : 'miss']);
          this.metrics.prefixDepth.observe([model], reason.blocks);
          const deflected = deflections(reason);
          if (deflected > 0) this.metrics.prefixDeflections.inc([model], deflected);
        } else if ('fallback' in reason) {
          this.metrics.prefixAffinity.inc([model, 'miss']);
        }
      },
    });
    // Keep-alive connections to every engine, reused across requests. Idle ones close after 4 s,
    // before engines' own keep-alive (uvicorn: 5 s) can close them under a request; a reused
    // connection that was closed anyway is resent once (see ProxyHandler).
    this.pool = new EnginePool({ connectTimeoutMs: config.proxy.connectTimeoutMs, idleSocketTimeoutMs: 4_000, maxIdlePerEngine: 1_024 });
    // Key limits: exact across routers in Redis when configured, this router's share while Redis is
    // unreachable (limit ÷ the routers the controller counts), exact in memory without Redis.
    const limitsLog = deps.logger.child({ context: 'KeyLimits' });
    this.redis = config.limits.redisUrl === undefined ? undefined : (deps.redis ?? connectRedis(config.limits.redisUrl, config.limits.redisTimeoutMs, limitsLog));
    this.limiter = new SharedLimiter({
      ...(this.redis !== undefined && { shared: new RedisLimiter({ redis: this.redis, prefix: config.limits.redisPrefix, leaseMs: config.limits.leaseMs, clock, batchMost: config.limits.batchMost }) }),
      local: new MemoryLimiter({ clock, leaseMs: config.limits.leaseMs }),
      routers: () => this.fleetRouters,
      clock,
      retryMs: 1_000,
      onChange: (degraded, error) => {
        this.metrics.limitsDegraded.set(degraded ? 1 : 0);
        if (degraded) limitsLog.warn({ err: error instanceof Error ? error.message : String(error), routers: this.fleetRouters }, 'Redis unreachable: enforcing each key limit divided by the routers the controller counts');
        else limitsLog.info('Redis reachable again: key limits are shared across routers again');
      },
    });
    this.keyLimits = new KeyLimitsStage(this.limiter, config.limits.tokenEstimate);
    this.leaseRenewMs = Math.max(1_000, Math.floor(config.limits.leaseMs / 3));
    this.proxy = new ProxyHandler(
      this.endpoints,
      this.admission,
      auth,
      this.keyLimits,
      (key, model, usage) => this.keyUsage.add(key, model, usage, clock.now()),
      this.metrics,
      this.pool,
      clock,
      deps.logger.child({ context: 'ProxyHandler' }),
      config.proxy,
    );
    this.scraper = new EndpointScraper(this.endpoints, clock, config.scrape, this.metrics, deps.logger.child({ context: 'EndpointScraper' }), (state) =>
      this.admission.wake(state.endpoint.model),
    );

    const addresses = config.controllerAddresses;
    if (deps.snapshots !== undefined && addresses !== undefined) {
      throw new Error('an in-process snapshot source and controller addresses exclude each other: the router follows one controller');
    }
    this.feed = deps.snapshots !== undefined ? new InProcessFeed(deps.snapshots, this.endpoints, deps.logger.child({ context: 'InProcessFeed' }), (keys, routers) => this.takeTenancy(keys, routers)) : undefined;
    // Usage goes to the controller the watch follows.
    let usageClient: (() => RouterServiceClient) | undefined;
    if (addresses !== undefined) {
      const createClient = deps.createClient ?? controllerClientFactory(config.grpc);
      const clientFor = (address: string): RouterServiceClient => {
        let client = this.clients.get(address);
        if (client === undefined) {
          client = createClient(address);
          this.clients.set(address, client);
        }
        return client;
      };
      const watch = new ControllerWatch(
        clientFor,
        this.endpoints,
        {
          addresses,
          routerId: this.routerId,
          ...(config.controllerToken !== undefined ? { token: config.controllerToken } : {}),
          backoffMinMs: config.watch.backoffMinMs,
          backoffMaxMs: config.watch.backoffMaxMs,
          rng,
          clock,
        },
        deps.logger.child({ context: 'ControllerWatch' }),
        {
          snapshot: (result) => this.metrics.watchSnapshots.inc({ result: result.applied ? 'applied' : 'stale' }),
          invalid: () => this.metrics.watchSnapshots.inc({ result: 'invalid' }),
          reconnect: () => this.metrics.watchReconnects.inc(),
          notLeader: () => this.metrics.watchNotLeader.inc(),
          tenancy: (keys, routers) => this.takeTenancy(keys, routers),
        },
      );
      this.watch = watch;
      usageClient = () => clientFor(watch.controller);
    }
    const sink = deps.usageSink ?? (usageClient !== undefined ? new GrpcUsageSink(usageClient, this.routerId, 5_000, config.controllerToken) : undefined);
    if (sink !== undefined) {
      this.usage = new UsageReporter(
        this.endpoints,
        sink,
        config.usageIntervalMs,
        deps.logger.child({ context: 'UsageReporter' }),
        (ok) => this.metrics.usageReports.inc({ result: ok ? 'ok' : 'error' }),
        this.keyUsage,
      );
    }
    this.metrics.attach({
      registry: this.endpoints,
      queueDepths: () => this.admission.depths(),
      watch: () => this.watch?.state,
      clock,
    });
  }

  /** `controller` when endpoints come from a controller (the watch stream or in process), `static` when from the config file alone. */
  get mode(): 'controller' | 'static' {
    return this.watch !== undefined || this.feed !== undefined ? 'controller' : 'static';
  }

  /** The managed keys and the count of routers from an applied controller snapshot. */
  private takeTenancy(keys: readonly ManagedKey[] | undefined, routers: number): void {
    if (keys !== undefined) this.auth.replaceManaged(keys);
    this.fleetRouters = routers;
  }

  /** Serves one request under `/v1`. */
  get handle(): ApiHandler {
    return this.proxy.handle;
  }

  /**
   * Seeds from the config file, then starts scraping, the watch stream and usage reports.
   * `onFirstSnapshot` runs once the router has a routing table it may serve from: at once in
   * static mode, after the first snapshot from the controller otherwise.
   */
  start(onFirstSnapshot: () => void): void {
    if (this.started) return;
    this.started = true;
    if (this.seed !== undefined) {
      this.endpoints.apply(this.seed, { resync: true });
      this.logger.info({ endpoints: this.seed.endpoints.length, models: this.seed.catalog.models.length }, 'routing table seeded from the config file');
    }
    if (this.mode === 'static') {
      if (this.seed === undefined) this.logger.warn('no controller and no config file: serving no models');
      onFirstSnapshot();
    } else {
      let first = true;
      this.endpoints.onSnapshot(() => {
        if (!first) return;
        first = false;
        onFirstSnapshot();
      });
      this.watch?.start();
      this.feed?.start();
    }
    this.scraper.start();
    this.usage?.start();
    this.renewTimer = setInterval(() => void this.keyLimits.renewOpen().catch(() => undefined), this.leaseRenewMs);
    this.renewTimer.unref();
    this.logger.info({ mode: this.mode, routerId: this.routerId }, 'router started');
  }

  /** Stops taking news (watch, scrapes) and refuses queued requests; sends a last usage report. */
  async drain(): Promise<void> {
    this.watch?.stop();
    this.feed?.stop();
    this.scraper.stop();
    this.usage?.stop();
    this.admission.close();
    await this.limiter.close();
    await this.usage?.tick();
  }

  /** Requests in flight to engines. */
  inFlight(): number {
    return this.endpoints.inFlight();
  }

  /** Ends every request still in flight (see EnginePool.cutBusy); returns how many were cut. */
  cutInFlight(): number {
    return this.pool.cutBusy();
  }

  /** Releases sockets and the gRPC channels (after the HTTP server has closed). */
  close(): void {
    clearInterval(this.renewTimer);
    this.redis?.disconnect();
    this.pool.destroy();
    for (const client of this.clients.values()) client.close();
  }
}

/**
 * The Redis client key limits use: it fails fast (a command timeout well under a request's budget,
 * no offline queue, no retries per command) so a slow or absent Redis costs a request at most
 * `timeoutMs` before the router enforces its share alone, and it keeps reconnecting in the
 * background. Connection errors are logged at debug: the limiter reports the outage once.
 */
function connectRedis(url: string, timeoutMs: number, log: Logger): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: timeoutMs, connectTimeout: 2_000, retryStrategy: (times) => Math.min(times * 200, 2_000) });
  redis.on('error', (error: Error) => log.debug({ err: error.message }, 'Redis connection error'));
  return redis;
}
