// Starts llmgw-catalog as a real process on port 0 for end-to-end tests.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inheritedTestEnv, runTsEntry, spawnProcess, type SpawnedProcess } from '@llmgw/testing';

/** The admin token the test apps run with. */
export const TEST_TOKEN = 'test-admin-token-0123456789';
/** Booting Nest through SWC on two shared cores can take several seconds. */
export const BOOT_DEADLINE_MS = 60_000;

/** A running catalog app: its base URL and process; `stop()` ends it and removes its data dir. */
export interface CatalogApp {
  readonly url: string;
  readonly proc: SpawnedProcess;
  stop(): Promise<void>;
}

/**
 * Starts the app with `databaseUrl` (default: SQLite in a fresh data dir) plus extra settings,
 * from an environment without the caller's LLMGW_* variables; resolves once /readyz answers 200.
 */
export async function startCatalogApp(options: { databaseUrl?: string; env?: Record<string, string> } = {}): Promise<CatalogApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-catalog-e2e-'));
  const inherited = inheritedTestEnv();
  let proc: SpawnedProcess;
  try {
    proc = await spawnProcess({
      ...runTsEntry('apps/catalog/src/main.ts'),
      name: 'llmgw-catalog',
      cleanEnv: true,
      env: {
        ...inherited,
        LLMGW_DATA_DIR: dataDir,
        LLMGW_CATALOG_PORT: '0',
        LLMGW_CATALOG_ADMIN_TOKEN: TEST_TOKEN,
        ...(options.databaseUrl ? { LLMGW_DATABASE_URL: options.databaseUrl } : {}),
        ...options.env,
      },
      readyWhen: {
        stdoutMatch: /llmgw-catalog listening on (http:\/\/127\.0\.0\.1:\d+)/,
        http: { url: (p) => `${p.readyMatch?.[1]}/readyz` },
      },
      deadlineMs: BOOT_DEADLINE_MS,
    });
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: proc.readyMatch?.[1] as string,
    proc,
    async stop() {
      await proc.stop('SIGTERM', 10_000);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
