import { GRPC_TRANSPORT_ENV, grpcTransportConfig, grpcTransportProblems, env, SHARED_ENV, sharedConfig, type DeepReadonly } from '@llmgw/config';
import { z } from 'zod';
import { DISCOVERY_ENV, discoveryOptions } from '../discovery/discovery.config';
import { AGENT_RUNTIME_ENV, runtimeEnvProblems, runtimeOptions } from '../runtime/runtime.config';

/**
 * Every setting llmgw-agent reads, validated once at boot: the shared LLMGW_* variables plus
 * its own (discovery, controllers, engines, weights). Unknown variables are ignored; a bad value
 * for a known one refuses to start.
 */
export const agentConfigSchema = z
  .object({
    ...SHARED_ENV,
    /** HTTP listener (health, readiness, metrics); 0 = any free port. */
    LLMGW_AGENT_PORT: env.port({ default: 8084 }),
    ...DISCOVERY_ENV,
    ...AGENT_RUNTIME_ENV,
    /** TLS to the controller: the CA its certificate is checked against, and a client certificate for mTLS. */
    ...GRPC_TRANSPORT_ENV,
  })
  .superRefine((e, ctx) => {
    for (const [variable, message] of [...runtimeEnvProblems(e), ...grpcTransportProblems(e, 'client')]) ctx.addIssue({ code: 'custom', path: [variable], message });
  })
  .transform((e) => ({
    ...sharedConfig(e),
    port: e.LLMGW_AGENT_PORT,
    discovery: discoveryOptions(e),
    runtime: runtimeOptions(e, e.LLMGW_DATA_DIR),
    /** How the connection to the controller is secured. */
    grpc: grpcTransportConfig(e, 'client'),
  }));

/** llmgw-agent's configuration: frozen, typed, in the names code uses. */
export type AgentConfig = DeepReadonly<z.output<typeof agentConfigSchema>>;

/** Injection token of {@link AgentConfig}. */
export const AGENT_CONFIG = Symbol('llmgw.agent-config');
