import { GRPC_TRANSPORT_ENV, grpcTransportConfig, grpcTransportProblems, env, envVar, parseDuration, SHARED_ENV, sharedConfig, type DeepReadonly, type EnvParse } from '@llmgw/config';
import { DomainError } from '@llmgw/domain';
import { buildScorers, DEFAULT_SCORER_WEIGHTS } from '@llmgw/routing';
import { z } from 'zod';

const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
const bad = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/** A duration (see parseDuration) of at least `minMs` milliseconds. */
function durationAtLeast(minMs: number): EnvParse<number> {
  return (raw) => {
    const parsed = parseDuration(raw);
    if (!parsed.ok) return parsed;
    return parsed.value >= minMs ? parsed : bad(`expected a duration of at least ${minMs} ms`);
  };
}

/** A duration (see parseDuration) between `minMs` and `maxMs` milliseconds. */
function durationBetween(minMs: number, maxMs: number): EnvParse<number> {
  return (raw) => {
    const parsed = durationAtLeast(minMs)(raw);
    if (!parsed.ok) return parsed;
    return parsed.value <= maxMs ? parsed : bad(`expected a duration of at most ${maxMs} ms`);
  };
}

/** A fraction in (0, 1], written as a decimal number. */
const parseFraction: EnvParse<number> = (raw) => {
  const n = /^\d*\.?\d+$/.test(raw) ? Number(raw) : Number.NaN;
  return n > 0 && n <= 1 ? ok(n) : bad('expected a number greater than 0 and at most 1');
};

/** `host:port` of a gRPC server (`[v6]:port` for IPv6). */
const parseAddress: EnvParse<string> = (raw) => {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/.exec(raw);
  return m !== null && Number(m[3]) >= 1 && Number(m[3]) <= 65_535 ? ok(raw) : bad('expected host:port (no scheme), e.g. 10.0.0.2:8082');
};

/**
 * One or more controller addresses, comma-separated (`host:port,host:port`); each is checked,
 * and an empty item or one listed twice is refused.
 */
const parseAddresses: EnvParse<readonly string[]> = (raw) => {
  const parts = raw.split(',');
  if (parts.length === 1) {
    const one = parseAddress(raw);
    return one.ok ? ok([one.value]) : one;
  }
  const out: string[] = [];
  for (const [i, part] of parts.entries()) {
    const item = part.trim();
    const parsed = parseAddress(item);
    if (!parsed.ok) return bad(`item ${i + 1} (${JSON.stringify(item)}): ${parsed.reason}`);
    if (out.includes(item)) return bad(`${item} is listed twice`);
    out.push(item);
  }
  return ok(out);
};

/** `name=weight,...` for the endpoint picker's scorers; unknown names and non-positive weights are refused. */
const parseScorerWeights: EnvParse<Record<string, number>> = (raw) => {
  const weights: Record<string, number> = {};
  for (const [i, part] of raw.split(',').entries()) {
    const m = /^\s*([a-z-]+)\s*=\s*([^,\s]+)\s*$/.exec(part);
    if (m === null) return bad(`item ${i + 1} (${JSON.stringify(part)}): expected name=weight`);
    if (m[1] in weights) return bad(`scorer ${m[1]} is listed twice`);
    weights[m[1]] = /^\d*\.?\d+$/.test(m[2]) ? Number(m[2]) : Number.NaN;
  }
  try {
    buildScorers(weights);
  } catch (error) {
    if (error instanceof DomainError) return bad(error.problems.map((p) => `${p.path.replace(/^scorers\./, '')}: ${p.message}`).join('; '));
    throw error;
  }
  return ok(weights);
};

const seconds = (ms: number): number => Math.max(1, Math.round(ms / 1000));

/**
 * Every setting llmgw-router reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start.
 * Without LLMGW_ROUTER_CONTROLLER the router runs from LLMGW_ROUTER_CONFIG_FILE alone (static
 * endpoints and catalog); with neither it starts with no models.
 */

/** A Redis key prefix: 1–64 letters, digits and `:_.-` (no spaces, no braces: those make hash tags). */
const parseRedisPrefix: EnvParse<string> = (raw) =>
  /^[A-Za-z0-9:_.-]{1,64}$/.test(raw) ? { ok: true, value: raw } : { ok: false, reason: 'expected 1 to 64 letters, digits or : _ . -' };

export const routerConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics, the OpenAI API); 0 = any free port. */
    LLMGW_ROUTER_PORT: env.port({ default: 8080 }),
    /** Names this router to the controller; default `<hostname>-<pid>`. */
    LLMGW_ROUTER_ID: env.string({ optional: true }),
    /**
     * Controller gRPC addresses (`host:port`, comma-separated: every controller sharing the
     * lease) to watch endpoints from and report usage to; the router follows the leader among
     * them. Unset = static mode.
     */
    LLMGW_ROUTER_CONTROLLER: envVar(parseAddresses, { optional: true }),
    /** TLS to the controller (with LLMGW_ROUTER_CONTROLLER): the CA its certificate is checked against, and a client certificate for mTLS. */
    ...GRPC_TRANSPORT_ENV,
    /** The controller's router token (its LLMGW_CONTROLLER_ROUTER_TOKEN), sent on Watch and ReportUsage; unset = none sent. */
    LLMGW_ROUTER_CONTROLLER_TOKEN: env.token({ optional: true }),
    /** YAML/JSON file with `models` and `endpoints`: the whole routing table in static mode, the seed otherwise. */
    LLMGW_ROUTER_CONFIG_FILE: env.path({ optional: true }),
    /** YAML/JSON file with `keys: [{ name, key }]`; unset = no authentication. */
    LLMGW_ROUTER_API_KEYS_FILE: env.path({ optional: true }),
    /** Largest request body accepted, bytes (larger → 413); default 16 MiB. */
    LLMGW_ROUTER_MAX_BODY_BYTES: env.integer(1, 1024 * 1024 * 1024, { default: 16 * 1024 * 1024 }),
    /** Deepest nesting of objects and arrays accepted in a request body (deeper → 400, before any of it is parsed). */
    LLMGW_ROUTER_MAX_JSON_DEPTH: env.integer(1, 10_000, { default: 64 }),
    /** Client connections held open at once; further ones are closed as they arrive. */
    LLMGW_ROUTER_MAX_CONNECTIONS: env.integer(1, 1_000_000, { default: 10_000 }),
    /** A request body arriving slower than this on average, bytes/s, after the grace period gets 408 and its connection closes; 0 = no floor. */
    LLMGW_ROUTER_MIN_BODY_RATE: env.integer(0, 1024 * 1024 * 1024, { default: 1_024 }),
    /** How long a body may take before the rate floor applies, counted from the end of its head. */
    LLMGW_ROUTER_BODY_RATE_GRACE: envVar(durationAtLeast(1), { default: 10_000 }),
    /** Requests one model may hold waiting when every endpoint is saturated (past it → 429); 0 = never queue. */
    LLMGW_ROUTER_QUEUE_SIZE: env.integer(0, 1_000_000, { default: 256 }),
    /** Longest a request waits in the queue before 429. */
    LLMGW_ROUTER_QUEUE_TIMEOUT: envVar(durationAtLeast(1), { default: 30_000 }),
    /** An endpoint whose engine reports this many waiting requests is saturated. */
    LLMGW_ROUTER_MAX_WAITING: env.integer(1, 1_000_000, { default: 32 }),
    /** An endpoint whose engine reports this KV-cache use (0..1] is saturated. */
    LLMGW_ROUTER_MAX_KV_USAGE: envVar(parseFraction, { default: 0.95 }),
    /** An endpoint with this many requests in flight from this router is saturated. */
    LLMGW_ROUTER_MAX_IN_FLIGHT: env.integer(1, 1_000_000, { default: 256 }),
    /** Scorer weights, `name=weight,...` (scorers: queue, kv-cache, running, in-flight). */
    LLMGW_ROUTER_SCORERS: envVar(parseScorerWeights, { default: { ...DEFAULT_SCORER_WEIGHTS } }),
    /** Extra attempts on other endpoints after a failure before the first response byte. */
    LLMGW_ROUTER_RETRIES: env.integer(0, 10, { default: 2 }),
    /** Consecutive failures that open an endpoint's circuit breaker. */
    LLMGW_ROUTER_BREAKER_FAILURES: env.integer(1, 1_000, { default: 5 }),
    /** How long an open breaker keeps an endpoint out before one probe. */
    LLMGW_ROUTER_BREAKER_COOLDOWN: envVar(durationAtLeast(1), { default: 10_000 }),
    LLMGW_ROUTER_CONNECT_TIMEOUT: envVar(durationAtLeast(1), { default: 3_000 }),
    /** Longest wait for an engine's response headers (long prompts and engine queues count). */
    LLMGW_ROUTER_FIRST_BYTE_TIMEOUT: envVar(durationAtLeast(1), { default: 300_000 }),
    /** Longest silence from an engine in the middle of a response. */
    LLMGW_ROUTER_IDLE_TIMEOUT: envVar(durationAtLeast(1), { default: 60_000 }),
    /** How long a streamed answer's head and role-only chunks wait for the first content before they are sent anyway (0 = never hold; at most 30 s). */
    LLMGW_ROUTER_HOLD_UNTIL_CONTENT: envVar(durationBetween(0, 30_000), { default: 2_000 }),
    /** Adds `x-llmgw-route` (chosen replica and why) to every proxied response; off by default: it names replicas to clients. */
    LLMGW_ROUTER_DEBUG_HEADER: env.boolean({ default: false }),
    /** Per-key series (llmgw_router_key_*): one per key and model, so off by default to bound cardinality. */
    LLMGW_ROUTER_KEY_METRICS: env.boolean({ default: false }),
    LLMGW_ROUTER_SCRAPE_INTERVAL: envVar(durationAtLeast(10), { default: 1_000 }),
    /** One scrape may take this long (at most 60 s); past it the scrape counts as unanswered. */
    LLMGW_ROUTER_SCRAPE_TIMEOUT: envVar(durationBetween(1, 60_000), { default: 800 }),
    /** Unanswered scrapes in a row that make an endpoint unavailable (one makes it suspect). */
    LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER: env.integer(1, 100, { default: 3 }),
    /** A scrape older than this is not used (the picker falls back to local in-flight). */
    LLMGW_ROUTER_SCRAPE_STALE_AFTER: envVar(durationAtLeast(1), { default: 5_000 }),
    /** Redis holding API key limits for every router (`redis://` or `rediss://`); unset = this router alone, exactly. */
    LLMGW_REDIS_URL: env.url(['redis:', 'rediss:'], { optional: true }),
    /** Prefix of every Redis key the limits write: fleets sharing one Redis (and tests) keep apart by it. */
    LLMGW_ROUTER_REDIS_PREFIX: envVar(parseRedisPrefix, { default: 'llmgw:limits:' }),
    /** Longest a limit check may wait for Redis before this router enforces its share alone. */
    LLMGW_ROUTER_REDIS_TIMEOUT: envVar(durationAtLeast(1), { default: 50 }),
    /** Tokens a request without max_tokens reserves against a key's token limits. */
    LLMGW_ROUTER_TOKEN_ESTIMATE: env.integer(1, 10_000_000, { default: 1_024 }),
    /** How long a request's claim on a concurrency limit lasts without renewal (what a dead router can leak). */
    LLMGW_ROUTER_LIMIT_LEASE: envVar(durationAtLeast(1_000), { default: 60_000 }),
    /** The most permits of a busy key this router takes from Redis ahead of use (one round trip per batch); 0: every request asks Redis. */
    LLMGW_ROUTER_LIMIT_BATCH: env.integer(0, 1_024, { default: 64 }),
    /** How often replica last-used times go to the controller. */
    LLMGW_ROUTER_USAGE_INTERVAL: envVar(durationAtLeast(10), { default: 10_000 }),
    /** Upper bound of Retry-After on 429/503. */
    LLMGW_ROUTER_RETRY_AFTER_MAX: envVar(durationAtLeast(1_000), { default: 30_000 }),
    /** After SIGTERM: how long the router keeps serving with /readyz false, so load balancers stop sending before it stops listening. */
    LLMGW_ROUTER_DRAIN_DELAY: envVar(durationBetween(0, 600_000), { default: 2_000 }),
    /** Then: how long requests in flight may take to finish; past it the rest are cut (a stream ends with an SSE error). */
    LLMGW_ROUTER_DRAIN_TIMEOUT: envVar(durationBetween(0, 3_600_000), { default: 5_000 }),
    LLMGW_ROUTER_WATCH_BACKOFF_MIN: envVar(durationAtLeast(1), { default: 200 }),
    LLMGW_ROUTER_WATCH_BACKOFF_MAX: envVar(durationAtLeast(1), { default: 10_000 }),
  })
  .superRefine((e, ctx) => {
    if (e.LLMGW_ROUTER_CONTROLLER !== undefined) {
      for (const [variable, message] of grpcTransportProblems(e, 'client')) ctx.addIssue({ code: 'custom', path: [variable], message });
    }
    if (e.LLMGW_ROUTER_DRAIN_DELAY + e.LLMGW_ROUTER_DRAIN_TIMEOUT + 1_000 > e.LLMGW_SHUTDOWN_TIMEOUT) {
      ctx.addIssue({
        code: 'custom',
        path: ['LLMGW_ROUTER_DRAIN_TIMEOUT'],
        message: `LLMGW_ROUTER_DRAIN_DELAY + LLMGW_ROUTER_DRAIN_TIMEOUT (${e.LLMGW_ROUTER_DRAIN_DELAY + e.LLMGW_ROUTER_DRAIN_TIMEOUT} ms) must leave at least 1s of LLMGW_SHUTDOWN_TIMEOUT (${e.LLMGW_SHUTDOWN_TIMEOUT} ms)`,
      });
    }
    if (e.LLMGW_ROUTER_WATCH_BACKOFF_MAX < e.LLMGW_ROUTER_WATCH_BACKOFF_MIN) {
      ctx.addIssue({ code: 'custom', path: ['LLMGW_ROUTER_WATCH_BACKOFF_MAX'], message: 'must not be shorter than LLMGW_ROUTER_WATCH_BACKOFF_MIN' });
    }
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_ROUTER_PORT,
    routerId: e.LLMGW_ROUTER_ID,
    controllerAddresses: e.LLMGW_ROUTER_CONTROLLER,
    controllerToken: e.LLMGW_ROUTER_CONTROLLER_TOKEN,
    /** How the connection to the controller is secured. */
    grpc: grpcTransportConfig(e, 'client'),
    configFile: e.LLMGW_ROUTER_CONFIG_FILE,
    apiKeysFile: e.LLMGW_ROUTER_API_KEYS_FILE,
    http: {
      maxConnections: e.LLMGW_ROUTER_MAX_CONNECTIONS,
      minBodyBytesPerSecond: e.LLMGW_ROUTER_MIN_BODY_RATE,
      bodyRateGraceMs: e.LLMGW_ROUTER_BODY_RATE_GRACE,
    },
    proxy: {
      maxBodyBytes: e.LLMGW_ROUTER_MAX_BODY_BYTES,
      maxJsonDepth: e.LLMGW_ROUTER_MAX_JSON_DEPTH,
      maxRetries: e.LLMGW_ROUTER_RETRIES,
      connectTimeoutMs: e.LLMGW_ROUTER_CONNECT_TIMEOUT,
      firstByteTimeoutMs: e.LLMGW_ROUTER_FIRST_BYTE_TIMEOUT,
      idleTimeoutMs: e.LLMGW_ROUTER_IDLE_TIMEOUT,
      holdUntilContentMs: e.LLMGW_ROUTER_HOLD_UNTIL_CONTENT,
      debugHeader: e.LLMGW_ROUTER_DEBUG_HEADER,
      keyMetrics: e.LLMGW_ROUTER_KEY_METRICS,
    },
    admission: {
      thresholds: { maxWaiting: e.LLMGW_ROUTER_MAX_WAITING, maxKvUsage: e.LLMGW_ROUTER_MAX_KV_USAGE, maxInFlight: e.LLMGW_ROUTER_MAX_IN_FLIGHT },
      queueBound: e.LLMGW_ROUTER_QUEUE_SIZE,
      queueDeadlineMs: e.LLMGW_ROUTER_QUEUE_TIMEOUT,
      retryAfterMaxSeconds: seconds(e.LLMGW_ROUTER_RETRY_AFTER_MAX),
    },
    scorerWeights: e.LLMGW_ROUTER_SCORERS,
    breaker: { failureThreshold: e.LLMGW_ROUTER_BREAKER_FAILURES, cooldownMs: e.LLMGW_ROUTER_BREAKER_COOLDOWN },
    scrape: {
      intervalMs: e.LLMGW_ROUTER_SCRAPE_INTERVAL,
      timeoutMs: e.LLMGW_ROUTER_SCRAPE_TIMEOUT,
      staleAfterMs: e.LLMGW_ROUTER_SCRAPE_STALE_AFTER,
      unavailableAfter: e.LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER,
    },
    usageIntervalMs: e.LLMGW_ROUTER_USAGE_INTERVAL,
    limits: { redisUrl: e.LLMGW_REDIS_URL, redisPrefix: e.LLMGW_ROUTER_REDIS_PREFIX, redisTimeoutMs: e.LLMGW_ROUTER_REDIS_TIMEOUT, tokenEstimate: e.LLMGW_ROUTER_TOKEN_ESTIMATE, leaseMs: e.LLMGW_ROUTER_LIMIT_LEASE, batchMost: e.LLMGW_ROUTER_LIMIT_BATCH },
    watch: { backoffMinMs: e.LLMGW_ROUTER_WATCH_BACKOFF_MIN, backoffMaxMs: e.LLMGW_ROUTER_WATCH_BACKOFF_MAX },
    drain: { delayMs: e.LLMGW_ROUTER_DRAIN_DELAY, timeoutMs: e.LLMGW_ROUTER_DRAIN_TIMEOUT },
  }));

/** llmgw-router's configuration: frozen, typed, in the names code uses. */
export type RouterConfig = DeepReadonly<z.output<typeof routerConfigSchema>>;

/** Injection token of {@link RouterConfig}. */
export const ROUTER_CONFIG = Symbol('llmgw.router-config');
