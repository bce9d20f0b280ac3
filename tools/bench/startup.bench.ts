// Start-up benchmark: how long each server app takes from `spawn` to its first `/readyz` 200,
// built (`node dist/apps/<app>/main.js`, as it ships) against from source (`node tools/run.cjs
// apps/<app>/src/main.ts`, the SWC loader), in one run. Each start gets a fresh data folder
// (SQLite created and migrated where the app has a store) and the settings the built-apps e2e
// starts it with: router in static mode, controller with both gRPC tokens, catalog API, agent
// without a controller; every port 0; gRPC over TLS (a CA and certificate made for the run, as
// `llmgw certs` would). Starts alternate built/source so drift hits both alike.
// Usage: node tools/run.cjs tools/bench/startup.bench.ts [--runs 5] [--apps router,controller,catalog,agent] [--no-build] [--no-write]
// Builds the apps through Nx first (from its cache when nothing changed) unless --no-build.
// Writes its section of docs/benchmarks.md unless --no-write.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createTestPki, grpcTlsEnv, repoRoot, runTsEntry, spawnProcess, stopAllSpawned } from '@llmgw/testing';
import { machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

/** Each server app: its Nx project, its dist folder and source entry, and the settings it needs. */
const APPS = {
  router: { project: 'router', env: { LLMGW_ROUTER_PORT: '0' } },
  controller: {
    project: 'controller',
    env: {
      LLMGW_CONTROLLER_PORT: '0',
      LLMGW_CONTROLLER_GRPC_PORT: '0',
      // The controller refuses to start without both gRPC tokens (values only for this bench).
      LLMGW_CONTROLLER_JOIN_TOKEN: 'b7e2c94f0a1d36e8b7e2c94f',
      LLMGW_CONTROLLER_ROUTER_TOKEN: '3c8a5f1e9d20b7463c8a5f1e',
    },
  },
  catalog: { project: 'catalog-api', env: { LLMGW_CATALOG_PORT: '0' } },
  agent: { project: 'agent', env: { LLMGW_AGENT_PORT: '0' } },
} as const;
type App = keyof typeof APPS;
const MODES = ['built', 'source'] as const;
type Mode = (typeof MODES)[number];

const DEADLINE_MS = 60_000;

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    apps: { type: 'string', default: Object.keys(APPS).join(',') },
    'no-build': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
  },
});
const RUNS = Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1 || RUNS > 50) throw new Error(`--runs: expected a whole number 1..50, got ${args.runs}`);
const APP_LIST = args.apps.split(',').map((a) => a.trim());
for (const app of APP_LIST) if (!(app in APPS)) throw new Error(`--apps: unknown app '${app}' (expected some of ${Object.keys(APPS).join(', ')})`);

/** Starts `app` once in `mode` with a fresh data folder and `tls` settings; ms from spawn to the first /readyz 200. */
async function startOnce(app: App, mode: Mode, tls: Record<string, string>): Promise<number> {
  const dir = mkdtempSync(join(os.tmpdir(), `llmgw-bench-startup-${app}-`));
  const entry = mode === 'built' ? { command: process.execPath, args: [join(repoRoot(), 'dist', 'apps', app, 'main.js')] } : runTsEntry(`apps/${app}/src/main.ts`);
  try {
    const started = performance.now();
    const proc = await spawnProcess({
      ...entry,
      cwd: repoRoot(),
      name: `llmgw-${app} (${mode})`,
      cleanEnv: true,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, LLMGW_DATA_DIR: join(dir, 'data'), ...tls, ...APPS[app].env },
      readyWhen: {
        stdoutMatch: new RegExp(`llmgw-${app} listening on (http://127\\.0\\.0\\.1:\\d+)`),
        check: async (p) => (await fetch(`${p.readyMatch?.[1]}/readyz`, { signal: AbortSignal.timeout(2_000) })).status === 200,
        checkName: 'GET /readyz 200',
      },
      deadlineMs: DEADLINE_MS,
    });
    const ms = performance.now() - started;
    const exit = await proc.stop('SIGTERM', 15_000);
    if (exit.code !== 0) throw new Error(`llmgw-${app} (${mode}) exited ${exit.code ?? exit.signal} on SIGTERM${proc.describeOutput()}`);
    return ms;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const load0 = os.loadavg()[0];
  if (!args['no-build']) {
    const projects = APP_LIST.map((a) => APPS[a as App].project);
    const nx = join(repoRoot(), 'node_modules', '.bin', 'nx');
    const build = spawnSync(nx, ['run-many', '-t', 'build', '-p', ...projects, '--output-style=static'], {
      cwd: repoRoot(),
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
      stdio: 'inherit',
    });
    if (build.status !== 0) throw new Error('nx run-many -t build failed');
  }
  const pki = await createTestPki();
  const tls = grpcTlsEnv(pki);
  const times = new Map<string, number[]>();
  for (const app of APP_LIST as App[]) {
    for (let run = 0; run < RUNS; run++) {
      // Alternate which mode goes first, so neither always starts right after the other.
      const order = run % 2 === 0 ? MODES : [...MODES].reverse();
      for (const mode of order) {
        const ms = await startOnce(app, mode, tls);
        const key = `${app}/${mode}`;
        times.set(key, [...(times.get(key) ?? []), ms]);
        process.stdout.write(`${key} run ${run + 1}: ${ms.toFixed(0)} ms\n`);
      }
    }
  }
  const load1 = os.loadavg()[0];
  rmSync(pki.dir, { recursive: true, force: true });

  const fmt = (ms: number) => ms.toFixed(0);
  const rows: string[][] = [['app', 'runs', 'built min', 'built median', 'built max', 'source min', 'source median', 'source max', 'built ÷ source (median)']];
  for (const app of APP_LIST) {
    const built = times.get(`${app}/built`) ?? [];
    const source = times.get(`${app}/source`) ?? [];
    rows.push([
      app,
      String(RUNS),
      fmt(Math.min(...built)),
      fmt(percentile(built, 50)),
      fmt(Math.max(...built)),
      fmt(Math.min(...source)),
      fmt(percentile(source, 50)),
      fmt(Math.max(...source)),
      `${(percentile(built, 50) / percentile(source, 50)).toFixed(2)}×`,
    ]);
  }
  printTable(rows);
  if (args['no-write']) return;
  const md = [
    `Command: \`npm run bench:startup\` (= \`node tools/run.cjs tools/bench/startup.bench.ts --runs ${RUNS}\`).`,
    '',
    `Machine: ${machineLine(os.cpus(), os.totalmem())}. Load average (1 min) ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end: the machine is shared, so waiting for a core is part of these times.`,
    '',
    "Milliseconds from `spawn` to the first `GET /readyz` answered 200 (the probe polls every 20 ms after the app's `listening` line), each start with a fresh data folder, so the controller and the catalog API create and migrate their SQLite database every time. Built: `node dist/apps/<app>/main.js` (plain Node, as the images and the systemd unit run it). Source: `node tools/run.cjs apps/<app>/src/main.ts` (the SWC loader compiles the TypeScript as it loads). Settings as the built-apps e2e gives them: the router in static mode (no controller), the controller with its two gRPC tokens, the agent without a controller; ports 0; gRPC over TLS with a CA and certificate made for the run. Starts alternate built and source.",
    '',
    markdownTable(rows),
  ];
  const file = writeSection('startup', 'Start-up time to /readyz', md.join('\n'));
  process.stdout.write(`wrote ${file}\n`);
}

main().then(
  async () => {
    await stopAllSpawned();
    process.exit(0);
  },
  async (error: unknown) => {
    process.stderr.write(`startup bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    await stopAllSpawned();
    process.exit(1);
  },
);
