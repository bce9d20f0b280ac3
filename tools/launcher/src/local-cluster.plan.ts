// Which processes make up the local cluster and what each is told: pure, so it is tested alone.
import { join } from 'node:path';

/** The apps the launcher starts, in start order (the controller first: the others dial it). */
export const LOCAL_APPS = ['controller', 'catalog', 'router', 'agent'] as const;
export type LocalApp = (typeof LOCAL_APPS)[number];

/** Label shown in the log prefix of each app. */
export const APP_LABELS: Readonly<Record<LocalApp, string>> = { controller: 'controller', catalog: 'catalog', router: 'router', agent: 'agent' };

/** Ports after the launcher resolved any 0 to a free one. */
export interface ResolvedPorts {
  readonly router: number;
  readonly controller: number;
  readonly controllerGrpc: number;
  readonly catalog: number;
  readonly agent: number;
}

/** What the plan depends on. Paths absolute. */
export interface LocalClusterInput {
  readonly repoRoot: string;
  readonly dataDir: string;
  /** LLMGW_HOST the apps bind to. */
  readonly host: string;
  readonly ports: ResolvedPorts;
  /** The rendered catalog file the controller seeds its store from. */
  readonly catalogFile: string;
  /** Admin token of the controller admin API and the catalog API (kept in the data directory), for `llmgw` as LLMGW_ADMIN_TOKEN. */
  readonly adminToken: string;
  /** Join token the controller requires and the agent sends (kept in the data directory). */
  readonly joinToken: string;
  /** Router token the controller requires and the router sends (kept in the data directory). */
  readonly routerToken: string;
  /**
   * gRPC TLS files (the launcher's CA and the controller's server certificate); undefined when
   * the user set LLMGW_GRPC_INSECURE=true, which every app then inherits as it is.
   */
  readonly grpcTls: { readonly caFile: string; readonly certFile: string; readonly keyFile: string } | undefined;
  /** The llama.cpp executable the agent runs (llama-server, or the bundled node-llama-cpp engine). */
  readonly llamaServer: string;
  /** Variables the user set; a setting the user made is never overridden by a launcher default. */
  readonly userEnv: Readonly<Record<string, string | undefined>>;
}

/** One process to start: its entry, the variables set for it on top of the inherited environment. */
export interface AppLaunch {
  readonly app: LocalApp;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/**
 * The address clients on this machine use for a server bound to `host`: a wildcard bind is
 * reached on loopback, anything else as given (IPv6 in brackets).
 */
export function clientHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '[::1]';
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/**
 * The four processes of a one-machine cluster sharing one SQLite store in the data directory
 * (the agent keeps its state in `<data dir>/agent`, its weights cache in `<data dir>/cache`, and
 * reads `file://` weights only under `<data dir>/models`).
 * Launcher defaults (a short settling window, the cache location) apply only where the user set
 * nothing. The join and router tokens are the launcher's own, given to both ends of each
 * connection, so the controller never runs without them. With `grpcTls` the controller serves
 * gRPC with the server certificate and the agent and the router verify it against the CA
 * (server TLS; no client certificates). The agent is told which llama.cpp executable to run
 * (`llamaServer`).
 */
export function planLocalCluster(input: LocalClusterInput, nodeExecPath: string): AppLaunch[] {
  const { ports, dataDir } = input;
  const grpc = `${clientHost(input.host)}:${ports.controllerGrpc}`;
  const defaults = (values: Record<string, string | undefined>): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(values)) {
      if (value === undefined) continue;
      const user = input.userEnv[key];
      out[key] = user !== undefined && user !== '' ? user : value;
    }
    return out;
  };
  const common = { LLMGW_DATA_DIR: dataDir, LLMGW_HOST: input.host };
  const tls = input.grpcTls;
  const serverTls: Record<string, string> = tls === undefined ? {} : { LLMGW_GRPC_TLS_CERT: tls.certFile, LLMGW_GRPC_TLS_KEY: tls.keyFile };
  const clientTls: Record<string, string> = tls === undefined ? {} : { LLMGW_GRPC_TLS_CA: tls.caFile };
  const entry = (app: LocalApp): { command: string; args: string[] } => ({
    command: nodeExecPath,
    args: [join(input.repoRoot, 'tools', 'run.cjs'), join(input.repoRoot, 'apps', app, 'src', 'main.ts')],
  });

  return [
    {
      app: 'controller',
      ...entry('controller'),
      env: {
        ...common,
        LLMGW_CONTROLLER_PORT: String(ports.controller),
        LLMGW_CONTROLLER_GRPC_PORT: String(ports.controllerGrpc),
        LLMGW_CONTROLLER_CATALOG_FILE: input.catalogFile,
        LLMGW_CONTROLLER_JOIN_TOKEN: input.joinToken,
        LLMGW_CONTROLLER_ROUTER_TOKEN: input.routerToken,
        ...serverTls,
        // One agent, started together with the controller: nothing to wait for before placing.
        ...defaults({ LLMGW_CONTROLLER_SETTLE: '2s', LLMGW_CONTROLLER_ADMIN_TOKEN: input.adminToken }),
      },
    },
    {
      app: 'catalog',
      ...entry('catalog'),
      env: { ...common, LLMGW_CATALOG_PORT: String(ports.catalog), ...defaults({ LLMGW_CATALOG_ADMIN_TOKEN: input.adminToken }) },
    },
    {
      app: 'router',
      ...entry('router'),
      env: { ...common, LLMGW_ROUTER_PORT: String(ports.router), LLMGW_ROUTER_CONTROLLER: grpc, LLMGW_ROUTER_CONTROLLER_TOKEN: input.routerToken, ...clientTls },
    },
    {
      app: 'agent',
      ...entry('agent'),
      env: {
        ...common,
        LLMGW_AGENT_PORT: String(ports.agent),
        LLMGW_AGENT_CONTROLLERS: grpc,
        LLMGW_AGENT_JOIN_TOKEN: input.joinToken,
        LLMGW_AGENT_LLAMA_SERVER: input.llamaServer,
        ...clientTls,
        // The generated model lives in <data dir>/models: the one place file:// sources may be read.
        ...defaults({ LLMGW_AGENT_CACHE_DIR: join(dataDir, 'cache'), LLMGW_AGENT_SOURCE_DIRS: join(dataDir, 'models') }),
      },
    },
  ];
}

/** A copy-pasteable chat completion request for `model` through the router at `baseUrl` (…/v1). */
export function curlExample(baseUrl: string, model: string): string {
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 32 });
  return `curl -sS ${baseUrl}/chat/completions -H 'Content-Type: application/json' -d '${body.replace(/'/g, `'\\''`)}'`;
}
