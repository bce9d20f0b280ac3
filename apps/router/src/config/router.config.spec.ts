import { ConfigError, loadConfig } from '@llmgw/config';
import { describe, expect, it } from 'vitest';
import { routerConfigSchema } from './router.config';
import { testGrpcTlsEnv } from '@llmgw/testing';

/** The gRPC TLS files every config below is given (the test PKI), unless a test is about them. */
const TLS = testGrpcTlsEnv();

describe('routerConfigSchema', () => {
  it('has defaults for everything: static mode, no auth, default scorers', () => {
    const c = loadConfig(routerConfigSchema, { ...TLS });
    expect(c).toMatchObject({
      port: 8080,
      controllerAddresses: undefined,
      configFile: undefined,
      apiKeysFile: undefined,
      proxy: { maxBodyBytes: 16 * 1024 * 1024, maxJsonDepth: 64, maxRetries: 2 },
      http: { maxConnections: 10_000, minBodyBytesPerSecond: 1_024, bodyRateGraceMs: 10_000 },
      admission: { thresholds: { maxWaiting: 32, maxKvUsage: 0.95, maxInFlight: 256 }, queueBound: 256, queueDeadlineMs: 30_000, retryAfterMaxSeconds: 30 },
      scorerWeights: { queue: 3, 'awaiting-output': 3, 'kv-cache': 2, running: 1, 'in-flight': 1, 'scrape-health': 2 },
      breaker: { failureThreshold: 5, cooldownMs: 10_000 },
    });
  });

  it('reads every router setting', () => {
    const c = loadConfig(routerConfigSchema, { ...TLS,
      LLMGW_ROUTER_CONTROLLER: '10.0.0.2:8082',
      LLMGW_ROUTER_CONTROLLER_TOKEN: 'router-token-0123456789',
      LLMGW_ROUTER_SCORERS: 'queue=1,in-flight=0.5',
      LLMGW_ROUTER_MAX_KV_USAGE: '0.8',
      LLMGW_ROUTER_QUEUE_TIMEOUT: '2s',
      LLMGW_ROUTER_RETRY_AFTER_MAX: '1m',
      LLMGW_ROUTER_MAX_JSON_DEPTH: '16',
      LLMGW_ROUTER_MAX_CONNECTIONS: '50',
      LLMGW_ROUTER_MIN_BODY_RATE: '0',
      LLMGW_ROUTER_BODY_RATE_GRACE: '3s',
    });
    expect(c.proxy.maxJsonDepth).toBe(16);
    expect(c.http).toEqual({ maxConnections: 50, minBodyBytesPerSecond: 0, bodyRateGraceMs: 3_000 });
    expect(c.controllerAddresses).toEqual(['10.0.0.2:8082']);
    expect(c.controllerToken).toBe('router-token-0123456789');
    expect(c.scorerWeights).toEqual({ queue: 1, 'in-flight': 0.5 });
    expect(c.admission).toMatchObject({ thresholds: { maxKvUsage: 0.8 }, queueDeadlineMs: 2_000, retryAfterMaxSeconds: 60 });
  });

  it('takes a comma list of controller addresses (every controller sharing the lease), and refuses a bad or repeated item by its place', () => {
    expect(loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_CONTROLLER: '10.0.0.2:8082, [fd00::3]:8082,controller-b.svc:8082' }).controllerAddresses).toEqual([
      '10.0.0.2:8082',
      '[fd00::3]:8082',
      'controller-b.svc:8082',
    ]);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_CONTROLLER: '10.0.0.2:8082,http://b:8082' })).toThrow(
      'LLMGW_ROUTER_CONTROLLER="10.0.0.2:8082,http://b:8082": item 2 ("http://b:8082"): expected host:port (no scheme), e.g. 10.0.0.2:8082',
    );
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_CONTROLLER: '10.0.0.2:8082,' })).toThrow(/item 2 \(""\): expected host:port/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_CONTROLLER: 'a:1,b:1,a:1' })).toThrow(/a:1 is listed twice/);
  });

  it('refuses bad values, naming each variable and value, instead of falling back to a default', () => {
    let error: unknown;
    try {
      loadConfig(routerConfigSchema, { ...TLS,
        LLMGW_ROUTER_CONTROLLER: 'http://controller:8082',
        LLMGW_ROUTER_SCORERS: 'queue=3,prefix=1',
        LLMGW_ROUTER_MAX_KV_USAGE: '1.5',
        LLMGW_ROUTER_QUEUE_TIMEOUT: '0',
        LLMGW_ROUTER_WATCH_BACKOFF_MIN: '5s',
        LLMGW_ROUTER_WATCH_BACKOFF_MAX: '1s',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map((p) => `${p.variable}=${p.shown}: ${p.reason}`)).toEqual([
      'LLMGW_ROUTER_CONTROLLER="http://controller:8082": expected host:port (no scheme), e.g. 10.0.0.2:8082',
      'LLMGW_ROUTER_QUEUE_TIMEOUT="0": expected a duration of at least 1 ms',
      'LLMGW_ROUTER_MAX_KV_USAGE="1.5": expected a number greater than 0 and at most 1',
      'LLMGW_ROUTER_SCORERS="queue=3,prefix=1": prefix: unknown scorer (known: queue, running, kv-cache, in-flight, awaiting-output, scrape-health)',
    ]);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_WATCH_BACKOFF_MIN: '5s', LLMGW_ROUTER_WATCH_BACKOFF_MAX: '1s' })).toThrow(
      /LLMGW_ROUTER_WATCH_BACKOFF_MAX.*must not be shorter/,
    );
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_MAX_JSON_DEPTH: '0' })).toThrow(/LLMGW_ROUTER_MAX_JSON_DEPTH/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_MAX_CONNECTIONS: 'many' })).toThrow(/LLMGW_ROUTER_MAX_CONNECTIONS/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_MIN_BODY_RATE: '-1' })).toThrow(/LLMGW_ROUTER_MIN_BODY_RATE/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_BODY_RATE_GRACE: 'soon' })).toThrow(/LLMGW_ROUTER_BODY_RATE_GRACE/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_SCORERS: 'queue=0' })).toThrow(/queue: weight must be a positive number, got 0/);
  });

  it('takes a Redis key prefix for the limits, and refuses one that is spaced, braced or long', () => {
    expect(loadConfig(routerConfigSchema, {}).limits.redisPrefix).toBe('llmgw:limits:');
    expect(loadConfig(routerConfigSchema, { LLMGW_ROUTER_REDIS_PREFIX: 'fleet-b:limits:' }).limits.redisPrefix).toBe('fleet-b:limits:');
    for (const bad of ['a b', '{tag}', 'x'.repeat(65)]) expect(() => loadConfig(routerConfigSchema, { LLMGW_ROUTER_REDIS_PREFIX: bad })).toThrow(/LLMGW_ROUTER_REDIS_PREFIX/);
  });

  it('refuses a controller token that is short or an example placeholder, naming the variable, never the value', () => {
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_CONTROLLER_TOKEN: 'change-me' })).toThrow(/LLMGW_ROUTER_CONTROLLER_TOKEN=<redacted>: expected 16 to 512 characters/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_CONTROLLER_TOKEN: 'change-me-router-token-0123' })).toThrow(/LLMGW_ROUTER_CONTROLLER_TOKEN=<redacted>: looks like an example placeholder/);
    expect(loadConfig(routerConfigSchema, { ...TLS }).controllerToken).toBeUndefined();
  });

  it('bounds the scrape timeout and the unanswered scrapes that make an endpoint unavailable', () => {
    expect(loadConfig(routerConfigSchema, { ...TLS }).scrape).toEqual({ intervalMs: 1_000, timeoutMs: 800, staleAfterMs: 5_000, unavailableAfter: 3 });
    expect(loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_SCRAPE_TIMEOUT: '2s', LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER: '5' }).scrape).toMatchObject({
      timeoutMs: 2_000,
      unavailableAfter: 5,
    });
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_SCRAPE_TIMEOUT: '5m' })).toThrow(/LLMGW_ROUTER_SCRAPE_TIMEOUT.*at most 60000 ms/);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER: '0' })).toThrow(/LLMGW_ROUTER_SCRAPE_UNAVAILABLE_AFTER/);
  });

  it('bounds how long a streamed head is held for its first content (0 = never)', () => {
    expect(loadConfig(routerConfigSchema, { ...TLS }).proxy.holdUntilContentMs).toBe(2_000);
    expect(loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_HOLD_UNTIL_CONTENT: '0' }).proxy.holdUntilContentMs).toBe(0);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_HOLD_UNTIL_CONTENT: '1m' })).toThrow(/LLMGW_ROUTER_HOLD_UNTIL_CONTENT.*at most 30000 ms/);
  });

  it('keeps the debug header off unless asked for', () => {
    expect(loadConfig(routerConfigSchema, { ...TLS }).proxy.debugHeader).toBe(false);
    expect(loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_DEBUG_HEADER: 'true' }).proxy.debugHeader).toBe(true);
    expect(() => loadConfig(routerConfigSchema, { ...TLS, LLMGW_ROUTER_DEBUG_HEADER: 'yes' })).toThrow(/LLMGW_ROUTER_DEBUG_HEADER/);
  });

  it('dials a controller over TLS: with LLMGW_ROUTER_CONTROLLER it needs the CA unless LLMGW_GRPC_INSECURE=true; without a controller it needs nothing', () => {
    expect(() => loadConfig(routerConfigSchema, { LLMGW_ROUTER_CONTROLLER: '127.0.0.1:8082' })).toThrow(/LLMGW_GRPC_TLS_CA.*is required.*LLMGW_GRPC_INSECURE=true/);
    expect(loadConfig(routerConfigSchema, { LLMGW_ROUTER_CONTROLLER: '127.0.0.1:8082', LLMGW_GRPC_TLS_CA: TLS.LLMGW_GRPC_TLS_CA }).grpc).toMatchObject({ insecure: false, caFile: TLS.LLMGW_GRPC_TLS_CA });
    expect(loadConfig(routerConfigSchema, { LLMGW_ROUTER_CONTROLLER: '127.0.0.1:8082', LLMGW_GRPC_INSECURE: 'true' }).grpc).toMatchObject({ insecure: true });
    expect(loadConfig(routerConfigSchema, {}).controllerAddresses).toBeUndefined();
  });
});
