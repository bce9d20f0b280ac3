import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { CreatedAgentRuntime } from './agent-runtime.factory';

/**
 * Starts the agent with the application (re-adopt engines, then connect) and, on shutdown,
 * disconnects without stopping any engine: engines outlive the agent process by design.
 */
export class AgentRuntimeLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(readonly agent: CreatedAgentRuntime) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.agent.runtime.start();
  }

  onApplicationShutdown(): void {
    this.agent.runtime.stop();
  }
}
