import { env, SHARED_ENV, sharedConfig, type DeepReadonly } from '@llmgw/config';
import { z } from 'zod';

/**
 * Every setting llmgw-agent reads, validated once at boot: the shared LLMGW_* variables plus
 * its own. Unknown variables are ignored; a bad value for a known one refuses to start.
 */
export const agentConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics); 0 = any free port. */
    LLMGW_AGENT_PORT: env.port({ default: 8084 }),
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_AGENT_PORT,
  }));

/** llmgw-agent's configuration: frozen, typed, in the names code uses. */
export type AgentConfig = DeepReadonly<z.output<typeof agentConfigSchema>>;

/** Injection token of {@link AgentConfig}. */
export const AGENT_CONFIG = Symbol('llmgw.agent-config');
