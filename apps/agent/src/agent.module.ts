import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, ReadinessService, type Logger } from '@llmgw/observability';
import { grpcSecurity } from '@llmgw/config';
import type { Registry } from 'prom-client';
import { AGENT_CONFIG, type AgentConfig } from './config/agent.config';
import { CONTROLLER_CLIENTS, controllerClientFactory, type ControllerClientFactory } from './connection/controller.clients';
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
          provide: CONTROLLER_CLIENTS,
          inject: [ReadinessService],
          useFactory: (readiness: ReadinessService) => {
            const grpc = options.config.grpc;
            if (grpc.insecure) options.logger.warn('LLMGW_GRPC_INSECURE: the connection to the controller is plaintext; the join token and catalog env values cross the network unencrypted');
            const detail = grpcSecurity(grpc, 'client');
            readiness.register('grpc', () => ({ ready: true, detail }));
            return controllerClientFactory(grpc);
          },
        },
        {
          provide: AgentRuntimeLifecycle,
          inject: [CONTROLLER_CLIENTS],
          useFactory: (createClient: ControllerClientFactory) =>
            new AgentRuntimeLifecycle(
              createAgentRuntime({
                runtime: options.config.runtime,
                discovery: options.config.discovery,
                inheritedEnv: options.inheritedEnv,
                logger: options.logger,
                onFatal: options.onFatal,
                createClient,
              }),
            ),
        },
      ],
      exports: [AGENT_CONFIG],
    };
  }
}
