// Test-only: runs the real llmgw-agent (apps/agent/src/main.ts) as a process, with the engine
// simulator in place of real engines and short timings, in a temporary state and cache directory.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inheritedTestEnv, processExists, runTsEntry, spawnProcess, type SpawnedProcess } from '@llmgw/testing';

export const AGENT_BOOT_DEADLINE_MS = 60_000;

/** A temporary home for one agent: data dir (state inside), cache dir. Remove with `remove()`. */
export class AgentHome {
  readonly root = mkdtempSync(join(tmpdir(), 'llmgw-agent-e2e-'));
  readonly dataDir = join(this.root, 'data');
  readonly stateDir = join(this.dataDir, 'agent');
  readonly cacheDir = join(this.root, 'cache');

  constructor() {
    mkdirSync(this.dataDir, { recursive: true });
    mkdirSync(this.cacheDir, { recursive: true });
  }

  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** This process's environment without any LLMGW_* setting, so the developer's shell cannot leak in. */
function baseEnv(): Record<string, string | undefined> {
  return inheritedTestEnv(['HF_']);
}

/** Starts llmgw-agent against `controllers`, ready once it listens. `env` overrides the test defaults. */
export function startAgent(home: AgentHome, controllers: string[], env: Record<string, string> = {}): Promise<SpawnedProcess> {
  return spawnProcess({
    ...runTsEntry('apps/agent/src/main.ts'),
    name: 'llmgw-agent',
    cleanEnv: true,
    env: {
      ...baseEnv(),
      LLMGW_LOG_LEVEL: 'debug',
      LLMGW_DATA_DIR: home.dataDir,
      LLMGW_AGENT_PORT: '0',
      LLMGW_AGENT_CACHE_DIR: home.cacheDir,
      LLMGW_AGENT_CONTROLLERS: controllers.join(','),
      LLMGW_AGENT_ENGINE_OVERRIDE: 'sim',
      LLMGW_AGENT_NVIDIA_SMI: join(home.root, 'no-nvidia-smi'),
      LLMGW_AGENT_RECONNECT_MIN: '100ms',
      LLMGW_AGENT_RECONNECT_MAX: '1s',
      LLMGW_AGENT_RESTART_BACKOFF: '300ms',
      LLMGW_AGENT_RESTART_LIMIT: '2',
      LLMGW_AGENT_READY_TIMEOUT: '60s',
      LLMGW_AGENT_STOP_GRACE: '10s',
      // What these tests use, allowed explicitly: weights files in the home, local HTTP servers.
      LLMGW_AGENT_SOURCE_DIRS: home.root,
      LLMGW_AGENT_SOURCE_SCHEMES: 'https,http,hf',
      LLMGW_AGENT_SOURCE_ALLOW_NETS: '127.0.0.1/32',
      ...env,
    },
    readyWhen: { stdoutMatch: /llmgw-agent listening on http:\/\/127\.0\.0\.1:(\d+)/ },
    deadlineMs: AGENT_BOOT_DEADLINE_MS,
  });
}

/**
 * Engine pids the agent started during a test, so the test can end them (by id) if an assertion
 * failed before the agent stopped them: engines deliberately outlive the agent.
 */
export class EnginePids {
  private readonly pids = new Set<number>();

  add(pid: number | undefined): void {
    if (pid !== undefined && pid > 0) this.pids.add(pid);
  }

  /** SIGKILLs each recorded engine's process group that still exists. */
  killAll(): void {
    for (const pid of this.pids) {
      if (!processExists(pid)) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    this.pids.clear();
  }
}
