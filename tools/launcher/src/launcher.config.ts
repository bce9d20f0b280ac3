import { join, resolve } from 'node:path';
import { env, SHARED_ENV, sharedConfig, type DeepReadonly } from '@llmgw/config';
import { z } from 'zod';

/** Repository root (tools/launcher/src → ../../..). */
export const REPO_ROOT = resolve(__dirname, '..', '..', '..');
/** The llama-server-compatible CPU engine on node-llama-cpp, relative to the repository: used where no llama-server is on PATH. */
export const BUNDLED_LLAMA_SERVER = join('tools', 'llama-engine', 'bin', 'llama-server-node');

/**
 * What the launcher reads, validated once: the shared LLMGW_* variables and each app's port (the
 * apps read the same variables, so one setting moves both the app and the launcher's wiring), plus
 * the launcher's own. Everything else in the environment passes through to the apps unchanged.
 */
export const launcherConfigSchema = z
  .object({
    ...SHARED_ENV,
    LLMGW_ROUTER_PORT: env.port({ default: 8080 }),
    LLMGW_CONTROLLER_PORT: env.port({ default: 8081 }),
    LLMGW_CONTROLLER_GRPC_PORT: env.port({ default: 8082 }),
    LLMGW_CATALOG_PORT: env.port({ default: 8083 }),
    LLMGW_AGENT_PORT: env.port({ default: 8084 }),
    /** Plaintext gRPC on purpose: no certificates are made and every app inherits the setting. Default false: TLS. */
    LLMGW_GRPC_INSECURE: env.boolean({ default: false }),
    /** Catalog template to serve; default deploy/local/catalog.yaml (one tiny CPU model). */
    LLMGW_LAUNCHER_CATALOG: env.path({ default: join(REPO_ROOT, 'deploy', 'local', 'catalog.yaml') }),
    /** Longest wait for the first replica to answer before the launcher gives up and stops everything. */
    LLMGW_LAUNCHER_READY_TIMEOUT: env.duration({ default: '5m' }),
  })
  .transform((e) => ({
    ...sharedConfig(e),
    ports: {
      router: e.LLMGW_ROUTER_PORT,
      controller: e.LLMGW_CONTROLLER_PORT,
      controllerGrpc: e.LLMGW_CONTROLLER_GRPC_PORT,
      catalog: e.LLMGW_CATALOG_PORT,
      agent: e.LLMGW_AGENT_PORT,
    },
    grpcInsecure: e.LLMGW_GRPC_INSECURE,
    catalogTemplate: e.LLMGW_LAUNCHER_CATALOG,
    readyTimeoutMs: e.LLMGW_LAUNCHER_READY_TIMEOUT,
  }));

/** The launcher's configuration: frozen, typed. Ports may be 0 (= pick a free one at start). */
export type LauncherConfig = DeepReadonly<z.output<typeof launcherConfigSchema>>;

/** The variable that sets each port, for error messages. */
export const PORT_VARIABLES: Readonly<Record<keyof LauncherConfig['ports'], string>> = {
  router: 'LLMGW_ROUTER_PORT',
  controller: 'LLMGW_CONTROLLER_PORT',
  controllerGrpc: 'LLMGW_CONTROLLER_GRPC_PORT',
  catalog: 'LLMGW_CATALOG_PORT',
  agent: 'LLMGW_AGENT_PORT',
};
