// Every NestJS app boots as a real process: config validated, /healthz, /readyz, /metrics that
// pass promtool, JSON logs, exit 0 on SIGTERM/SIGINT; a malformed setting stops it at boot
// with every bad variable named on stderr.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inheritedTestEnv, promtoolCheckMetrics, runTsEntry, spawnProcess, stopAllSpawned, type SpawnedProcess } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';

// Two cores shared with other work: booting Nest through SWC can take several seconds.
const BOOT_DEADLINE_MS = 60_000;
const EXIT_DEADLINE_MS = 15_000;
const TEST_TIMEOUT_MS = 120_000;

const APPS = [
  { app: 'router', portVar: 'LLMGW_ROUTER_PORT', extra: {} },
  {
    app: 'controller',
    portVar: 'LLMGW_CONTROLLER_PORT',
    // The controller refuses to start without both gRPC tokens.
    extra: { LLMGW_CONTROLLER_GRPC_PORT: '0', LLMGW_CONTROLLER_JOIN_TOKEN: 'a3f09c2e7b5d41e8a3f09c2e', LLMGW_CONTROLLER_ROUTER_TOKEN: '6d1b8e4f2a9c07536d1b8e4f' },
  },
  { app: 'catalog', portVar: 'LLMGW_CATALOG_PORT', extra: {} },
  { app: 'agent', portVar: 'LLMGW_AGENT_PORT', extra: {} },
] as const;

const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-boot-'));

afterAll(async () => {
  await stopAllSpawned();
  rmSync(dataDir, { recursive: true, force: true });
});

/** This process's environment without any LLMGW_* setting, so the developer's shell cannot leak in. */
function baseEnv(): Record<string, string | undefined> {
  return inheritedTestEnv();
}

function start(app: string, env: Record<string, string>): Promise<SpawnedProcess> {
  return spawnProcess({
    ...runTsEntry(`apps/${app}/src/main.ts`),
    name: `llmgw-${app}`,
    cleanEnv: true,
    env: { ...baseEnv(), LLMGW_DATA_DIR: dataDir, ...env },
    readyWhen: { stdoutMatch: new RegExp(`llmgw-${app} listening on (http://127\\.0\\.0\\.1:(\\d+))`) },
    deadlineMs: BOOT_DEADLINE_MS,
  });
}

describe.each(APPS)('llmgw-$app', ({ app, portVar, extra }) => {
  it(
    'boots on port 0, answers health, readiness and metrics, and exits 0 on SIGTERM',
    async () => {
      const proc = await start(app, { [portVar]: '0', ...extra });
      const [, base, port] = proc.readyMatch ?? [];
      expect(Number(port)).toBeGreaterThan(0);

      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });

      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ status: 'ready' });

      const metrics = await fetch(`${base}/metrics`);
      expect(metrics.status).toBe(200);
      const text = await metrics.text();
      expect(text).toContain('process_start_time_seconds');
      expect(promtoolCheckMetrics(text)).toEqual({ status: 0, output: '' });

      expect(await proc.stop('SIGTERM', EXIT_DEADLINE_MS)).toEqual({ code: 0, signal: null });
      await expect(fetch(`${base}/healthz`)).rejects.toThrow();

      // Structured logs: every stdout line is one JSON object from this app.
      const lines = proc.stdout.split('\n').filter(Boolean);
      expect(lines.length).toBeGreaterThan(1);
      for (const line of lines) expect(JSON.parse(line)).toMatchObject({ name: `llmgw-${app}`, level: expect.any(String) });
      expect(proc.stdout).toContain(`"msg":"llmgw-${app} shutting down"`);
      expect(proc.stderr).toBe('');
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'refuses to start with malformed settings, naming every one on stderr without a stack trace',
    async () => {
      const proc = await spawnProcess({
        ...runTsEntry(`apps/${app}/src/main.ts`),
        name: `llmgw-${app} (bad config)`,
        cleanEnv: true,
        env: { ...baseEnv(), LLMGW_DATA_DIR: dataDir, [portVar]: 'abc', LLMGW_LOG_LEVEL: 'loud' },
      });
      const exit = await proc.waitForExit(BOOT_DEADLINE_MS);
      await proc.stop();
      expect(exit).toEqual({ code: 1, signal: null });
      expect(proc.stderr).toBe(
        `llmgw-${app}: invalid configuration (2 problems):\n` +
          `  LLMGW_LOG_LEVEL="loud": expected one of fatal, error, warn, info, debug, trace, silent\n` +
          `  ${portVar}="abc": expected a port number 0..65535\n`,
      );
      expect(proc.stdout).toBe('');
    },
    TEST_TIMEOUT_MS,
  );
});

describe('llmgw-router signals', () => {
  it(
    'exits 0 on SIGINT too, and reports a port already in use as a failure to start',
    async () => {
      const first = await start('router', { LLMGW_ROUTER_PORT: '0' });
      const port = first.readyMatch?.[2] ?? '';
      const clash = await spawnProcess({
        ...runTsEntry('apps/router/src/main.ts'),
        name: 'llmgw-router (port in use)',
        cleanEnv: true,
        env: { ...baseEnv(), LLMGW_DATA_DIR: dataDir, LLMGW_ROUTER_PORT: port },
      });
      expect(await clash.waitForExit(BOOT_DEADLINE_MS)).toEqual({ code: 1, signal: null });
      await clash.stop();
      expect(clash.stderr).toMatch(/^llmgw-router: failed to start: .*EADDRINUSE/m);

      expect(await first.stop('SIGINT', EXIT_DEADLINE_MS)).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );
});
