import { Module, type DynamicModule } from '@nestjs/common';
import { ObservabilityModule, type Logger } from '@llmgw/observability';
import type { Registry } from 'prom-client';
import { AGENT_CONFIG, type AgentConfig } from './config/agent.config';

/** What llmgw-agent is built from: its validated config, its logger and its metrics registry. */
export interface AgentModuleOptions {
  config: AgentConfig;
  logger: Logger;
  registry: Registry;
}

/** Root module of llmgw-agent (one node: hardware discovery, engine processes, weights cache). Wiring only. */
@Module({})
export class AgentModule {
  static forRoot(options: AgentModuleOptions): DynamicModule {
    return {
      module: AgentModule,
      imports: [ObservabilityModule.forRoot({ logger: options.logger, registry: options.registry })],
      providers: [{ provide: AGENT_CONFIG, useValue: options.config }],
      exports: [AGENT_CONFIG],
    };
  }
}
