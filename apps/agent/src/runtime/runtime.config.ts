import { z } from 'zod';
import { isAbsolute } from 'node:path';
import { inNetwork, parseIp, parseIpNetwork, refusedAddressRange, type IpNetwork } from '@llmgw/catalog';
import { env, envVar, type DeepReadonly, type EnvParse } from '@llmgw/config';
import { controllerAddressProblem } from '../connection/controller-address.parser';
import { isValidNodeId } from '../state/node-id.store';
import { DEFAULT_ENGINE_PORTS, parsePortRange, type PortRange } from '../supervision/free-port.picker';
import { SOURCE_SCHEMES, type SourcePolicySettings, type SourceScheme } from '../weights/source.policy';

/** Variables engines inherit from the agent unless LLMGW_AGENT_ENGINE_ENV says otherwise (`*` ends a prefix). */
export const DEFAULT_ENGINE_ENV_PASSTHROUGH = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LC_*',
  'TZ',
  'TMPDIR',
  'LD_LIBRARY_PATH',
  'CUDA_HOME',
  'CUDA_PATH',
  'NCCL_*',
  'VLLM_*',
  'HF_HOME',
  'HF_HUB_OFFLINE',
  'TRANSFORMERS_OFFLINE',
  'PYTHONPATH',
  'VIRTUAL_ENV',
  'RAY_*',
] as const;

const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
const bad = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

const parseController: EnvParse<string> = (raw) => {
  const problem = controllerAddressProblem(raw);
  return problem === undefined ? ok(raw) : bad(problem);
};

const parseNodeId: EnvParse<string> = (raw) => (isValidNodeId(raw) ? ok(raw) : bad('expected 1..128 of [A-Za-z0-9._-], starting with a letter or digit'));

const parseAdvertise: EnvParse<string> = (raw) => {
  if (raw === '0.0.0.0' || raw === '::' || raw === '[::]') return bad('is a wildcard address routers cannot reach; give this node’s host name or IP');
  if (!/^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:]*:[0-9a-fA-F:.]*|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$/.test(raw)) {
    return bad('expected a host name or IP address (no scheme, port or path)');
  }
  return ok(raw.startsWith('[') ? raw.slice(1, -1) : raw);
};

const parseScheme: EnvParse<SourceScheme> = (raw) =>
  (SOURCE_SCHEMES as readonly string[]).includes(raw) ? ok(raw as SourceScheme) : bad(`expected one of ${SOURCE_SCHEMES.join(', ')} (file:// is allowed by LLMGW_AGENT_SOURCE_DIRS)`);

const parseHostPattern: EnvParse<string> = (raw) =>
  /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(raw) ? ok(raw.toLowerCase()) : bad('expected a host name, or *.domain for its subdomains');

const parseNetwork: EnvParse<IpNetwork> = (raw) => {
  const net = parseIpNetwork(raw);
  return net ? ok(net) : bad('expected an IP address or a network such as 10.0.0.0/8 or fd00::/8');
};

const parseAbsoluteDir: EnvParse<string> = (raw) => (isAbsolute(raw) ? ok(raw.replace(/(.)\/+$/, '$1')) : bad('expected an absolute directory'));

const parseEnvName: EnvParse<string> = (raw) =>
  /^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(raw) ? ok(raw) : bad('expected a variable name, or a prefix ending in *');

/**
 * The agent's own settings beyond discovery: identity, controllers, engines, weights. Spread
 * into the agent's `z.object({...})`, check with {@link runtimeEnvProblems}, map with
 * {@link runtimeOptions}.
 */
export const AGENT_RUNTIME_ENV = {
  /** Node id, engine records and engine logs; default `<LLMGW_DATA_DIR>/agent` (./.llmgw/agent). */
  LLMGW_AGENT_STATE_DIR: env.path({ optional: true }),
  /** Overrides the id kept in the state directory (generated once when unset). */
  LLMGW_AGENT_NODE_ID: envVar(parseNodeId, { optional: true }),
  /** Controller gRPC addresses `host:port,host:port`; any of them, the agent follows the leader. */
  LLMGW_AGENT_CONTROLLERS: env.list(parseController, { default: ['127.0.0.1:8082'] }),
  /** Join token, sent as `authorization: Bearer <token>`; unset = none sent. 16+ characters, not an example placeholder. */
  LLMGW_AGENT_JOIN_TOKEN: env.token({ optional: true }),
  /** Host or IP routers use to reach this node's engines; default 127.0.0.1. */
  LLMGW_AGENT_ADVERTISE_ADDRESS: envVar(parseAdvertise, { default: '127.0.0.1' }),
  /** Address engines bind to; default the advertise address. */
  LLMGW_AGENT_ENGINE_HOST: env.host({ optional: true }),
  /**
   * Ports engines and Ray heads get, `FIRST-LAST`; default 20000-29999, below the kernel's
   * ephemeral range so that no outgoing connection takes a picked port before its engine binds it.
   */
  LLMGW_AGENT_ENGINE_PORTS: envVar(parsePortRange, { default: DEFAULT_ENGINE_PORTS }),
  /** First and longest reconnect delay (jittered exponential backoff between them). */
  LLMGW_AGENT_RECONNECT_MIN: env.duration({ default: '500ms' }),
  LLMGW_AGENT_RECONNECT_MAX: env.duration({ default: '30s' }),
  /** `sim`: run the engine simulator (LLMGW_AGENT_SIM_ENGINE) in place of every real engine (development, fleet simulation). */
  LLMGW_AGENT_ENGINE_OVERRIDE: env.oneOf(['sim'] as const, { optional: true }),
  /** The simulator, a Node script run with this agent's Node (tools/sim-engine/bin/sim-engine in a checkout); only read with LLMGW_AGENT_ENGINE_OVERRIDE=sim. */
  LLMGW_AGENT_SIM_ENGINE: env.string({ optional: true }),
  /** vLLM executable (name on PATH or path); default vllm. */
  LLMGW_AGENT_VLLM: env.string({ default: 'vllm' }),
  /** llama-server executable (name on PATH or path); default llama-server. */
  LLMGW_AGENT_LLAMA_SERVER: env.string({ default: 'llama-server' }),
  /** Agent variables engines inherit (names, or prefixes ending in *); the agent's own secrets never pass. */
  LLMGW_AGENT_ENGINE_ENV: env.list(parseEnvName, { default: [...DEFAULT_ENGINE_ENV_PASSTHROUGH] }),
  /** How long an engine may load before it counts as failed; default 15m (large models load slowly). */
  LLMGW_AGENT_READY_TIMEOUT: env.duration({ default: '15m' }),
  /** Restarts after consecutive crashes before a replica stays failed; default 5. */
  LLMGW_AGENT_RESTART_LIMIT: env.integer(0, 1000, { default: 5 }),
  /** First restart delay, doubling per consecutive crash up to the maximum. */
  LLMGW_AGENT_RESTART_BACKOFF: env.duration({ default: '2s' }),
  LLMGW_AGENT_RESTART_BACKOFF_MAX: env.duration({ default: '5m' }),
  /** SIGTERM-to-SIGKILL grace when the controller names none; default 30s. */
  LLMGW_AGENT_STOP_GRACE: env.duration({ default: '30s' }),
  /** How often a ready engine's health endpoint is checked; default 5s. */
  LLMGW_AGENT_LIVENESS_INTERVAL: env.duration({ default: '5s' }),
  /** A health check with no 200 within this long fails; default 3s. */
  LLMGW_AGENT_LIVENESS_TIMEOUT: env.duration({ default: '3s' }),
  /** Failed health checks in a row after which a ready engine is reported not ready and restarted; default 3. */
  LLMGW_AGENT_LIVENESS_FAILURES: env.integer(1, 100, { default: 3 }),
  /** Engine log size bound: bytes per file and files kept (live + rotated). */
  LLMGW_AGENT_LOG_MAX_BYTES: env.integer(4096, Number.MAX_SAFE_INTEGER, { default: 50 * 1024 * 1024 }),
  LLMGW_AGENT_LOG_FILES: env.integer(1, 100, { default: 5 }),
  /** HTTP requests per weights file before a fetch fails (each resumes the last). */
  LLMGW_AGENT_FETCH_ATTEMPTS: env.integer(1, 1000, { default: 8 }),
  /** A download that delivers nothing for this long is abandoned and resumed. */
  LLMGW_AGENT_FETCH_STALL_TIMEOUT: env.duration({ default: '60s' }),
  /** Source schemes this node fetches (https, http, hf); file:// is governed by LLMGW_AGENT_SOURCE_DIRS. */
  LLMGW_AGENT_SOURCE_SCHEMES: env.list<SourceScheme, { default: SourceScheme[] }>(parseScheme, { default: ['https', 'hf'] }),
  /** When set, the only hosts http(s) sources may name (names, or *.domain); unset = any host with public addresses. */
  LLMGW_AGENT_SOURCE_HOSTS: env.list(parseHostPattern, { optional: true }),
  /** Networks in refused ranges (loopback, private, link-local, ...) this node may still fetch from; default none. */
  LLMGW_AGENT_SOURCE_ALLOW_NETS: env.list(parseNetwork, { default: [] }),
  /** Directories file:// sources must lie under (symbolic links resolved); default none = no file:// source. */
  LLMGW_AGENT_SOURCE_DIRS: env.list(parseAbsoluteDir, { default: [] }),
  /** When set, the only variables a catalog profile's env may set (names, or prefixes ending in *); the deny-list applies regardless. */
  LLMGW_AGENT_PROFILE_ENV_ALLOW: env.list(parseEnvName, { optional: true }),
  /** Hugging Face endpoint hf:// sources resolve against. */
  HF_ENDPOINT: env.url(['http:', 'https:'], { default: 'https://huggingface.co' }),
  /** Hugging Face token, sent only to HF_ENDPOINT. */
  HF_TOKEN: env.string({ optional: true }),
} as const;

export const runtimeEnvSchema = z.object(AGENT_RUNTIME_ENV);
export type RuntimeEnv = z.output<typeof runtimeEnvSchema>;

/** Rules across variables, as `[variable, reason]` pairs (for a zod superRefine). */
export function runtimeEnvProblems(e: DeepReadonly<RuntimeEnv>): [string, string][] {
  const problems: [string, string][] = [];
  if (e.LLMGW_AGENT_RECONNECT_MIN < 1) problems.push(['LLMGW_AGENT_RECONNECT_MIN', 'must be at least 1ms']);
  if (e.LLMGW_AGENT_RECONNECT_MAX < e.LLMGW_AGENT_RECONNECT_MIN) problems.push(['LLMGW_AGENT_RECONNECT_MAX', 'must not be shorter than LLMGW_AGENT_RECONNECT_MIN']);
  if (e.LLMGW_AGENT_RESTART_BACKOFF < 1) problems.push(['LLMGW_AGENT_RESTART_BACKOFF', 'must be at least 1ms']);
  if (e.LLMGW_AGENT_RESTART_BACKOFF_MAX < e.LLMGW_AGENT_RESTART_BACKOFF) problems.push(['LLMGW_AGENT_RESTART_BACKOFF_MAX', 'must not be shorter than LLMGW_AGENT_RESTART_BACKOFF']);
  if (e.LLMGW_AGENT_READY_TIMEOUT < 1) problems.push(['LLMGW_AGENT_READY_TIMEOUT', 'must be at least 1ms']);
  if (e.LLMGW_AGENT_FETCH_STALL_TIMEOUT < 1) problems.push(['LLMGW_AGENT_FETCH_STALL_TIMEOUT', 'must be at least 1ms']);
  // An endpoint the node's own policy would refuse to connect to is a mistake better seen at boot.
  const hfHost = new URL(e.HF_ENDPOINT).hostname.replace(/^\[|\]$/g, '');
  const hfIp = parseIp(hfHost);
  const hfRange = refusedAddressRange(hfHost);
  if (hfIp && hfRange !== undefined && !e.LLMGW_AGENT_SOURCE_ALLOW_NETS.some((n) => inNetwork(hfIp, n as IpNetwork))) {
    problems.push(['HF_ENDPOINT', `${hfHost} is in a refused range (${hfRange}); list its network in LLMGW_AGENT_SOURCE_ALLOW_NETS to fetch from it`]);
  }
  if (e.LLMGW_AGENT_LIVENESS_INTERVAL < 1) problems.push(['LLMGW_AGENT_LIVENESS_INTERVAL', 'must be at least 1ms']);
  if (e.LLMGW_AGENT_LIVENESS_TIMEOUT < 1) problems.push(['LLMGW_AGENT_LIVENESS_TIMEOUT', 'must be at least 1ms']);
  if (e.LLMGW_AGENT_ENGINE_OVERRIDE === 'sim' && e.LLMGW_AGENT_SIM_ENGINE === undefined) {
    problems.push(['LLMGW_AGENT_SIM_ENGINE', 'is required with LLMGW_AGENT_ENGINE_OVERRIDE=sim: the path of the engine simulator (tools/sim-engine/bin/sim-engine in a checkout)']);
  }
  return problems;
}

/** The runtime part of the agent's configuration, in the names code uses. Times in ms, sizes in bytes. */
export interface RuntimeOptions {
  readonly stateDir: string;
  readonly nodeId?: string;
  readonly advertiseAddress: string;
  readonly engineHost: string;
  readonly enginePorts: PortRange;
  readonly controllers: readonly string[];
  readonly joinToken?: string;
  readonly reconnect: { readonly minMs: number; readonly maxMs: number };
  readonly engineOverride?: 'sim';
  /** With engineOverride `sim`: the simulator script every engine is, run with the agent's Node. */
  readonly simEngine?: string;
  readonly vllmBinary: string;
  readonly llamaServerBinary: string;
  readonly engineEnvPassthrough: readonly string[];
  readonly readyTimeoutMs: number;
  readonly restartLimit: number;
  readonly restartBackoffMs: number;
  readonly restartBackoffMaxMs: number;
  readonly stopGraceMs: number;
  /** Health checks of ready engines (see SupervisionSettings.liveness). */
  readonly liveness: { readonly intervalMs: number; readonly timeoutMs: number; readonly failures: number };
  readonly logMaxBytes: number;
  readonly logFiles: number;
  readonly fetchAttempts: number;
  readonly fetchStallTimeoutMs: number;
  readonly hfEndpoint: string;
  readonly hfToken?: string;
  readonly sourcePolicy: SourcePolicySettings;
}

/** Maps the parsed variables; `dataDir` is LLMGW_DATA_DIR (absolute), the state directory's default parent. */
export function runtimeOptions(e: DeepReadonly<RuntimeEnv>, dataDir: string): RuntimeOptions {
  return {
    stateDir: e.LLMGW_AGENT_STATE_DIR ?? `${dataDir.replace(/\/+$/, '')}/agent`,
    ...(e.LLMGW_AGENT_NODE_ID !== undefined && { nodeId: e.LLMGW_AGENT_NODE_ID }),
    advertiseAddress: e.LLMGW_AGENT_ADVERTISE_ADDRESS,
    engineHost: e.LLMGW_AGENT_ENGINE_HOST ?? e.LLMGW_AGENT_ADVERTISE_ADDRESS,
    enginePorts: e.LLMGW_AGENT_ENGINE_PORTS,
    controllers: e.LLMGW_AGENT_CONTROLLERS,
    ...(e.LLMGW_AGENT_JOIN_TOKEN !== undefined && { joinToken: e.LLMGW_AGENT_JOIN_TOKEN }),
    reconnect: { minMs: e.LLMGW_AGENT_RECONNECT_MIN, maxMs: e.LLMGW_AGENT_RECONNECT_MAX },
    ...(e.LLMGW_AGENT_ENGINE_OVERRIDE !== undefined && { engineOverride: e.LLMGW_AGENT_ENGINE_OVERRIDE }),
    ...(e.LLMGW_AGENT_SIM_ENGINE !== undefined && { simEngine: e.LLMGW_AGENT_SIM_ENGINE }),
    vllmBinary: e.LLMGW_AGENT_VLLM,
    llamaServerBinary: e.LLMGW_AGENT_LLAMA_SERVER,
    engineEnvPassthrough: e.LLMGW_AGENT_ENGINE_ENV,
    readyTimeoutMs: e.LLMGW_AGENT_READY_TIMEOUT,
    restartLimit: e.LLMGW_AGENT_RESTART_LIMIT,
    restartBackoffMs: e.LLMGW_AGENT_RESTART_BACKOFF,
    restartBackoffMaxMs: e.LLMGW_AGENT_RESTART_BACKOFF_MAX,
    stopGraceMs: e.LLMGW_AGENT_STOP_GRACE,
    liveness: { intervalMs: e.LLMGW_AGENT_LIVENESS_INTERVAL, timeoutMs: e.LLMGW_AGENT_LIVENESS_TIMEOUT, failures: e.LLMGW_AGENT_LIVENESS_FAILURES },
    logMaxBytes: e.LLMGW_AGENT_LOG_MAX_BYTES,
    logFiles: e.LLMGW_AGENT_LOG_FILES,
    fetchAttempts: e.LLMGW_AGENT_FETCH_ATTEMPTS,
    fetchStallTimeoutMs: e.LLMGW_AGENT_FETCH_STALL_TIMEOUT,
    hfEndpoint: e.HF_ENDPOINT,
    ...(e.HF_TOKEN !== undefined && { hfToken: e.HF_TOKEN }),
    sourcePolicy: {
      schemes: e.LLMGW_AGENT_SOURCE_SCHEMES,
      ...(e.LLMGW_AGENT_SOURCE_HOSTS !== undefined && { hosts: e.LLMGW_AGENT_SOURCE_HOSTS }),
      allowNets: e.LLMGW_AGENT_SOURCE_ALLOW_NETS as readonly IpNetwork[],
      dirs: e.LLMGW_AGENT_SOURCE_DIRS,
      ...(e.LLMGW_AGENT_PROFILE_ENV_ALLOW !== undefined && { envAllow: e.LLMGW_AGENT_PROFILE_ENV_ALLOW }),
    },
  };
}

/**
 * The variables of `inherited` that `passthrough` names (exact names, or prefixes ending in `*`).
 * The agent's own `LLMGW_*` settings (its join token among them) never pass, whatever the list says.
 */
export function pickEngineEnv(inherited: Readonly<Record<string, string | undefined>>, passthrough: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(inherited)) {
    if (value === undefined || key.startsWith('LLMGW_')) continue;
    if (passthrough.some((p) => (p.endsWith('*') ? key.startsWith(p.slice(0, -1)) : key === p))) out[key] = value;
  }
  return out;
}
