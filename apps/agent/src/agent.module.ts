import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { AGENT_CONFIG, type AgentConfig } from './config/agent.config';
import type { JoinRejectedError } from './connection/controller.connection';
import { createAgentRuntime } from './runtime/agent-runtime.factory';
import { AgentRuntimeLifecycle } from './runtime/agent-runtime.lifecycle';

/** What llmgw-agent is built from: its validated config, its logger and its metrics registry. */
export interface AgentModuleOptions {
  config: AgentConfig;
  logger: Logger;
  registry: Registry;
  /** The environment the agent started with; engines inherit only what LLMGW_AGENT_ENGINE_ENV names. */
  inheritedEnv: Readonly<Record<string, string | undefined>>;
  /** A controller refused the join token: end the process (non-zero) instead of retrying. */
  onFatal: (error: JoinRejectedError) => void;
}

/** Root module of llmgw-agent (one node: hardware discovery, engine processes, weights cache). Wiring only. */
@Module({})
export class AgentModule {
  static forRoot(options: AgentModuleOptions): DynamicModule {
    return {
      module: AgentModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      providers: [
        { provide: AGENT_CONFIG, useValue: options.config },
        {
          provide: AgentRuntimeLifecycle,
          useFactory: () =>
            new AgentRuntimeLifecycle(
              createAgentRuntime({
                runtime: options.config.runtime,
                discovery: options.config.discovery,
                inheritedEnv: options.inheritedEnv,
                logger: options.logger,
                onFatal: options.onFatal,
              }),
            ),
        },
      ],
      exports: [AGENT_CONFIG],
    };
  }
}
