// Test support: the real llmgw-agent as a process (fake GPUs, the engine simulator in place of
// vLLM), in a home under `root`, for controller tests.
import { join } from 'node:path';
import { inheritedTestEnv, runTsEntry, spawnProcess, type SpawnedProcess } from '@llmgw/testing';

/**
 * Starts llmgw-agent `nodeId` against `controller` (one address or a comma list), ready once it
 * listens (unless `ready: false`); weights files under `root` are allowed, nothing else.
 */
export function startAgent(nodeId: string, controller: string, root: string, extra: { home?: string; env?: Record<string, string>; ready?: boolean } = {}): Promise<SpawnedProcess> {
  const home = extra.home ?? join(root, nodeId);
  const env = inheritedTestEnv(['HF_']);
  return spawnProcess({
    ...runTsEntry('apps/agent/src/main.ts'),
    name: `llmgw-agent ${nodeId}`,
    cleanEnv: true,
    env: {
      ...env,
      LLMGW_DATA_DIR: join(home, 'data'),
      LLMGW_AGENT_PORT: '0',
      LLMGW_AGENT_NODE_ID: nodeId,
      LLMGW_AGENT_CACHE_DIR: join(home, 'cache'),
      LLMGW_AGENT_CONTROLLERS: controller,
      LLMGW_AGENT_FAKE_GPUS: '8xH100-80GB',
      LLMGW_AGENT_ENGINE_OVERRIDE: 'sim',
      LLMGW_AGENT_ADVERTISE_ADDRESS: '127.0.0.1',
      LLMGW_AGENT_RECONNECT_MIN: '100ms',
      LLMGW_AGENT_RECONNECT_MAX: '1s',
      LLMGW_AGENT_READY_TIMEOUT: '60s',
      LLMGW_AGENT_STOP_GRACE: '5s',
      // The test's weights file lives in root: allowed explicitly, nothing else.
      LLMGW_AGENT_SOURCE_DIRS: root,
      ...extra.env,
    },
    readyWhen: extra.ready === false ? undefined : { stdoutMatch: /llmgw-agent listening on http:\/\/127\.0\.0\.1:(\d+)/ },
    deadlineMs: 60_000,
  });
}
