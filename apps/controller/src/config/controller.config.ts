import { DATABASE_ENV, env, SHARED_ENV, sharedConfig, type DeepReadonly } from '@llmgw/config';
import { z } from 'zod';

/**
 * Every setting llmgw-controller reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start.
 */
export const controllerConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics); 0 = any free port. */
    LLMGW_CONTROLLER_PORT: env.port({ default: 8081 }),
    /** gRPC listener for agents and routers. */
    LLMGW_CONTROLLER_GRPC_PORT: env.port({ default: 8082 }),
    ...DATABASE_ENV,
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_CONTROLLER_PORT,
    grpcPort: e.LLMGW_CONTROLLER_GRPC_PORT,
    /** Store connection; undefined = SQLite in the data dir. */
    databaseUrl: e.LLMGW_DATABASE_URL,
  }));

/** llmgw-controller's configuration: frozen, typed, in the names code uses. */
export type ControllerConfig = DeepReadonly<z.output<typeof controllerConfigSchema>>;

/** Injection token of {@link ControllerConfig}. */
export const CONTROLLER_CONFIG = Symbol('llmgw.controller-config');
