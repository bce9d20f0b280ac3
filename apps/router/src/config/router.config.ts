import { env, SHARED_ENV, sharedConfig, type DeepReadonly } from '@llmgw/config';
import { z } from 'zod';

/**
 * Every setting llmgw-router reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start.
 */
export const routerConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics, the OpenAI API); 0 = any free port. */
    LLMGW_ROUTER_PORT: env.port({ default: 8080 }),
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_ROUTER_PORT,
  }));

/** llmgw-router's configuration: frozen, typed, in the names code uses. */
export type RouterConfig = DeepReadonly<z.output<typeof routerConfigSchema>>;

/** Injection token of {@link RouterConfig}. */
export const ROUTER_CONFIG = Symbol('llmgw.router-config');
