import { join } from 'node:path';
import { DATABASE_ENV, GRPC_TRANSPORT_ENV, grpcTransportConfig, grpcTransportProblems, env, envVar, SHARED_ENV, sharedConfig, type DeepReadonly, type EnvParse } from '@llmgw/config';
import { z } from 'zod';

/** `host:port` (a host name, IPv4, or `[IPv6]`), as agents and routers dial it. */
const parseHostPort: EnvParse<string> = (raw) => {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/.exec(raw);
  if (!m || Number(m[3]) < 1 || Number(m[3]) > 65_535) return { ok: false, reason: 'expected host:port, e.g. 10.0.0.2:8082' };
  return { ok: true, value: raw };
};

/** The base URL another controller reaches this one's admin API at: `http(s)://host:port`, nothing more. */
const parseAdminUrl: EnvParse<string> = (raw) => {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'expected a URL such as http://10.0.0.2:8081' };
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '' || url.pathname !== '/' || url.search !== '' || url.hash !== '' || /\s/.test(raw)) {
    return { ok: false, reason: 'expected http(s)://host:port with no user, path, query or fragment' };
  }
  return { ok: true, value: `${url.protocol}//${url.host}` };
};

/** A lease name: letters, digits, `._-`, at most 64. */
const parseLeaseName: EnvParse<string> = (raw) =>
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(raw)
    ? { ok: true, value: raw }
    : { ok: false, reason: 'expected a lease name of letters, digits, ".", "_" or "-" (at most 64)' };

/**
 * Every setting llmgw-controller reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start. Durations
 * take `500ms`, `5s`, `2m` or whole milliseconds.
 */
export const controllerConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics, admin API); 0 = any free port. */
    LLMGW_CONTROLLER_PORT: env.port({ default: 8081 }),
    /** gRPC listener for agents and routers; 0 = any free port (the bound port is logged). */
    LLMGW_CONTROLLER_GRPC_PORT: env.port({ default: 8082 }),
    /** TLS of the gRPC listener: its certificate and key, and with LLMGW_GRPC_TLS_CLIENT_AUTH the CA client certificates must chain to. */
    ...GRPC_TRANSPORT_ENV,
    ...DATABASE_ENV,
    /** Agents must send `authorization: Bearer <token>`; required unless LLMGW_CONTROLLER_INSECURE_NO_AUTH=true. */
    LLMGW_CONTROLLER_JOIN_TOKEN: env.token({ optional: true }),
    /** Routers must send `authorization: Bearer <token>` (Watch, ReportUsage); required unless LLMGW_CONTROLLER_INSECURE_NO_AUTH=true. */
    LLMGW_CONTROLLER_ROUTER_TOKEN: env.token({ optional: true }),
    /** Explicitly run gRPC without the join and/or router token that is unset (logged as a warning): anyone reaching the port may join or watch. */
    LLMGW_CONTROLLER_INSECURE_NO_AUTH: env.boolean({ default: false }),
    /** Admin API bearer token; unset = the admin API answers loopback clients only. */
    LLMGW_CONTROLLER_ADMIN_TOKEN: env.token({ optional: true }),
    /** Catalog file (YAML or JSON) seeded into the store when the store holds no catalog yet. */
    LLMGW_CONTROLLER_CATALOG_FILE: env.path({ optional: true }),
    /** Lease name shared by the controllers of one store; unset = this controller always leads. */
    LLMGW_CONTROLLER_LEASE: envVar(parseLeaseName, { optional: true }),
    /** How long one lease claim lasts; a store outage shorter than this (minus 1 s skew) keeps leadership. */
    LLMGW_CONTROLLER_LEASE_TTL: env.duration({ default: '15s' }),
    /** Time between lease claims. */
    LLMGW_CONTROLLER_LEASE_RENEW: env.duration({ default: '5s' }),
    /** `host:port` agents reach this controller's gRPC at; a standby names the leader's in NotLeader. */
    LLMGW_CONTROLLER_ADVERTISE_ADDRESS: envVar(parseHostPort, { optional: true }),
    /** Base URL a standby forwards admin changes to while this controller leads; default `http://<advertised host>:<LLMGW_CONTROLLER_PORT>`. */
    LLMGW_CONTROLLER_ADVERTISE_ADMIN_URL: envVar(parseAdminUrl, { optional: true }),
    /** Interval agents send heartbeats at (told to them in Welcome). */
    LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: env.duration({ default: '5s' }),
    /** No heartbeat for this long: the node is unreachable (no new placements, endpoints suspect). */
    LLMGW_CONTROLLER_UNREACHABLE_AFTER: env.duration({ default: '15s' }),
    /** No heartbeat for this long: the node is lost (replicas gone, replacements placed). */
    LLMGW_CONTROLLER_LOST_AFTER: env.duration({ default: '60s' }),
    /** After taking the lead: how long agents get to reconnect before anything is started or stopped. */
    LLMGW_CONTROLLER_SETTLE: env.duration({ default: '20s' }),
    /** Past the settling window, how much longer it lasts while nodes that held replicas have not reconnected (0 = not at all). */
    LLMGW_CONTROLLER_SETTLE_HOLDERS: env.duration({ default: '40s' }),
    /** Reconcile, health check, catalog poll and store sync interval. */
    LLMGW_CONTROLLER_TICK: env.duration({ default: '1s' }),
    /** First retry delay of a failed replica or an unplaceable model; doubles per failure. */
    LLMGW_CONTROLLER_BACKOFF_MIN: env.duration({ default: '5s' }),
    /** Longest retry delay. */
    LLMGW_CONTROLLER_BACKOFF_MAX: env.duration({ default: '5m' }),
    /** Restarts in place before a failed replica is moved to another node. */
    LLMGW_CONTROLLER_MAX_RESTARTS: env.integer(0, 100, { default: 3 }),
    /** How long `gc collect` waits for agents' answers. */
    LLMGW_CONTROLLER_COMMAND_TIMEOUT: env.duration({ default: '30s' }),
  })
  .superRefine((e, ctx) => {
    for (const [variable, message] of grpcTransportProblems(e, 'server')) ctx.addIssue({ code: 'custom', path: [variable], message });
    if (!e.LLMGW_CONTROLLER_INSECURE_NO_AUTH) {
      const tokens: [keyof typeof e, string | undefined, string][] = [
        ['LLMGW_CONTROLLER_JOIN_TOKEN', e.LLMGW_CONTROLLER_JOIN_TOKEN, 'agents'],
        ['LLMGW_CONTROLLER_ROUTER_TOKEN', e.LLMGW_CONTROLLER_ROUTER_TOKEN, 'routers'],
      ];
      for (const [key, value, who] of tokens) {
        if (value === undefined) {
          ctx.addIssue({ code: 'custom', path: [key], message: `is required: without it anyone reaching the gRPC port is taken for one of the ${who} (set LLMGW_CONTROLLER_INSECURE_NO_AUTH=true to run without it on purpose)` });
        }
      }
    }
    const positive: [keyof typeof e, number][] = [
      ['LLMGW_CONTROLLER_HEARTBEAT_INTERVAL', e.LLMGW_CONTROLLER_HEARTBEAT_INTERVAL],
      ['LLMGW_CONTROLLER_TICK', e.LLMGW_CONTROLLER_TICK],
      ['LLMGW_CONTROLLER_BACKOFF_MIN', e.LLMGW_CONTROLLER_BACKOFF_MIN],
      ['LLMGW_CONTROLLER_COMMAND_TIMEOUT', e.LLMGW_CONTROLLER_COMMAND_TIMEOUT],
    ];
    for (const [key, value] of positive) {
      if (value <= 0) ctx.addIssue({ code: 'custom', path: [key], message: 'must be longer than 0' });
    }
    if (e.LLMGW_CONTROLLER_UNREACHABLE_AFTER <= e.LLMGW_CONTROLLER_HEARTBEAT_INTERVAL) {
      ctx.addIssue({ code: 'custom', path: ['LLMGW_CONTROLLER_UNREACHABLE_AFTER'], message: `must be longer than LLMGW_CONTROLLER_HEARTBEAT_INTERVAL (${e.LLMGW_CONTROLLER_HEARTBEAT_INTERVAL} ms)` });
    }
    if (e.LLMGW_CONTROLLER_LOST_AFTER <= e.LLMGW_CONTROLLER_UNREACHABLE_AFTER) {
      ctx.addIssue({ code: 'custom', path: ['LLMGW_CONTROLLER_LOST_AFTER'], message: `must be longer than LLMGW_CONTROLLER_UNREACHABLE_AFTER (${e.LLMGW_CONTROLLER_UNREACHABLE_AFTER} ms)` });
    }
    if (e.LLMGW_CONTROLLER_BACKOFF_MAX < e.LLMGW_CONTROLLER_BACKOFF_MIN) {
      ctx.addIssue({ code: 'custom', path: ['LLMGW_CONTROLLER_BACKOFF_MAX'], message: `must not be shorter than LLMGW_CONTROLLER_BACKOFF_MIN (${e.LLMGW_CONTROLLER_BACKOFF_MIN} ms)` });
    }
    if (e.LLMGW_CONTROLLER_LEASE !== undefined && e.LLMGW_CONTROLLER_LEASE_RENEW >= e.LLMGW_CONTROLLER_LEASE_TTL - 1_000) {
      ctx.addIssue({ code: 'custom', path: ['LLMGW_CONTROLLER_LEASE_RENEW'], message: `must be below LLMGW_CONTROLLER_LEASE_TTL minus 1s (${e.LLMGW_CONTROLLER_LEASE_TTL} ms)` });
    }
  })
  .transform((e) => {
    const shared = sharedConfig(e);
    return {
      ...shared,
      port: e.LLMGW_CONTROLLER_PORT,
      grpcPort: e.LLMGW_CONTROLLER_GRPC_PORT,
      /** TLS of the gRPC listener (or plaintext on purpose). */
      grpc: grpcTransportConfig(e, 'server'),
      /** Store connection; unset = SQLite file `llmgw.db` in the data dir. */
      databaseUrl: e.LLMGW_DATABASE_URL ?? `sqlite:${join(shared.dataDir, 'llmgw.db')}`,
      joinToken: e.LLMGW_CONTROLLER_JOIN_TOKEN,
      routerToken: e.LLMGW_CONTROLLER_ROUTER_TOKEN,
      /** LLMGW_CONTROLLER_INSECURE_NO_AUTH: a missing join or router token was allowed on purpose. */
      insecureNoAuth: e.LLMGW_CONTROLLER_INSECURE_NO_AUTH,
      adminToken: e.LLMGW_CONTROLLER_ADMIN_TOKEN,
      catalogFile: e.LLMGW_CONTROLLER_CATALOG_FILE,
      lease:
        e.LLMGW_CONTROLLER_LEASE === undefined
          ? undefined
          : { name: e.LLMGW_CONTROLLER_LEASE, ttlMs: e.LLMGW_CONTROLLER_LEASE_TTL, renewIntervalMs: e.LLMGW_CONTROLLER_LEASE_RENEW },
      advertiseAddress: e.LLMGW_CONTROLLER_ADVERTISE_ADDRESS,
      advertiseAdminUrl:
        e.LLMGW_CONTROLLER_ADVERTISE_ADMIN_URL ??
        (e.LLMGW_CONTROLLER_ADVERTISE_ADDRESS === undefined ? undefined : `http://${e.LLMGW_CONTROLLER_ADVERTISE_ADDRESS.slice(0, e.LLMGW_CONTROLLER_ADVERTISE_ADDRESS.lastIndexOf(':'))}:${e.LLMGW_CONTROLLER_PORT}`),
      timing: {
        heartbeatIntervalMs: e.LLMGW_CONTROLLER_HEARTBEAT_INTERVAL,
        unreachableAfterMs: e.LLMGW_CONTROLLER_UNREACHABLE_AFTER,
        lostAfterMs: e.LLMGW_CONTROLLER_LOST_AFTER,
        settleMs: e.LLMGW_CONTROLLER_SETTLE,
        settleHoldersMs: e.LLMGW_CONTROLLER_SETTLE_HOLDERS,
        tickMs: e.LLMGW_CONTROLLER_TICK,
        backoffMinMs: e.LLMGW_CONTROLLER_BACKOFF_MIN,
        backoffMaxMs: e.LLMGW_CONTROLLER_BACKOFF_MAX,
        maxRestarts: e.LLMGW_CONTROLLER_MAX_RESTARTS,
        commandTimeoutMs: e.LLMGW_CONTROLLER_COMMAND_TIMEOUT,
      },
    };
  });

/** llmgw-controller's configuration: frozen, typed, in the names code uses. */
export type ControllerConfig = DeepReadonly<z.output<typeof controllerConfigSchema>>;

/** The timing part of {@link ControllerConfig}; all milliseconds. */
export type ControllerTiming = ControllerConfig['timing'];

/** Injection token of {@link ControllerConfig}. */
export const CONTROLLER_CONFIG = Symbol('llmgw.controller-config');
