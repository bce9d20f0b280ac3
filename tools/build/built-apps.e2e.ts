// The built apps, shipped the way an image or a node gets them: `nx run-many -t build` writes
// dist/apps/<app>; each is copied to a temporary folder of its own, its dependencies installed
// there with `npm ci --omit=dev` from the generated package.json and lockfile, and started with
// plain `node main.js` (no TypeScript loader) from that folder with a minimal environment, so
// nothing of this repository can be reached. Each server answers /healthz on port 0 and exits
// 0 on SIGTERM; the CLI, packed and installed from its dist, prints its version and the status
// of a running built controller.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot, spawnProcess, stopAllSpawned, testGrpcTlsEnv, type SpawnedProcess } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);

// Two loaded cores: installing compiles the SQLite driver (about a minute each) for two apps.
const INSTALL_TIMEOUT_MS = 540_000;
const BOOT_DEADLINE_MS = 60_000;
const EXIT_DEADLINE_MS = 15_000;
const TEST_TIMEOUT_MS = 120_000;

/** The controller refuses to start without both gRPC tokens (values only for this test). */
const CONTROLLER_ENV = {
  LLMGW_CONTROLLER_PORT: '0',
  LLMGW_CONTROLLER_GRPC_PORT: '0',
  LLMGW_CONTROLLER_JOIN_TOKEN: 'b7e2c94f0a1d36e8b7e2c94f',
  LLMGW_CONTROLLER_ROUTER_TOKEN: '3c8a5f1e9d20b7463c8a5f1e',
};

const SERVERS = [
  { app: 'router', env: { LLMGW_ROUTER_PORT: '0' } },
  { app: 'controller', env: CONTROLLER_ENV },
  { app: 'catalog', env: { LLMGW_CATALOG_PORT: '0' } },
  { app: 'agent', env: { LLMGW_AGENT_PORT: '0' } },
] as const;
const APPS = [...SERVERS.map((s) => s.app), 'ctl'] as const;
/** Nx project names (the catalog API's project is `catalog-api`). */
const PROJECTS = ['router', 'controller', 'catalog-api', 'agent', 'ctl'];

const work = mkdtempSync(join(tmpdir(), 'llmgw-built-'));
/** Where each app's dist was copied and installed. */
const installed = new Map<string, string>();

afterAll(async () => {
  await stopAllSpawned();
  rmSync(work, { recursive: true, force: true });
});

/**
 * This process's environment without npm's per-script variables (npm test sets them) or LLMGW_*
 * settings. npm_config_nodedir stays: it names the headers of the Node running the tests (.ci/run
 * sets it for Node 24), which native modules must be compiled against.
 */
function npmEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && (!/^npm_/i.test(key) || key.toLowerCase() === 'npm_config_nodedir') && !key.startsWith('LLMGW_') && key !== 'INIT_CWD') env[key] = value;
  }
  return env;
}

/** All an app gets: PATH (for nothing of ours), its data folder, gRPC TLS files (the test PKI's) and its settings. */
function appEnv(dir: string, env: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, LLMGW_DATA_DIR: join(dir, 'data'), ...testGrpcTlsEnv(), ...env };
}

async function npm(args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run('npm', args, { cwd, env: npmEnv(), timeout: INSTALL_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const e = error as { message: string; stdout?: string; stderr?: string };
    throw new Error(`npm ${args.join(' ')} in ${cwd} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

function startBuilt(app: string, env: Record<string, string>): Promise<SpawnedProcess> {
  const dir = installed.get(app) as string;
  return spawnProcess({
    command: process.execPath,
    args: ['main.js'],
    cwd: dir,
    name: `built llmgw-${app}`,
    cleanEnv: true,
    env: appEnv(dir, env),
    readyWhen: { stdoutMatch: new RegExp(`llmgw-${app} listening on (http://127\\.0\\.0\\.1:(\\d+))`) },
    deadlineMs: BOOT_DEADLINE_MS,
  });
}

beforeAll(async () => {
  // 1. Build through Nx (served from its cache when nothing changed).
  const nx = join(repoRoot(), 'node_modules', '.bin', 'nx');
  await run(nx, ['run-many', '-t', 'build', '-p', ...PROJECTS, '--output-style=static'], {
    cwd: repoRoot(),
    env: { ...npmEnv(), NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
    timeout: INSTALL_TIMEOUT_MS,
    maxBuffer: 16 * 1024 * 1024,
  }).catch((error: { message: string; stdout?: string }) => {
    throw new Error(`nx run-many -t build failed: ${error.message}\n${error.stdout ?? ''}`);
  });
  // 2. Copy each dist away from the repository and install its pruned dependencies there.
  await Promise.all(
    APPS.map(async (app) => {
      const dir = join(work, app);
      cpSync(join(repoRoot(), 'dist', 'apps', app), dir, { recursive: true });
      await npm(['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], dir);
      installed.set(app, dir);
    }),
  );
}, INSTALL_TIMEOUT_MS + 60_000);

describe('built apps', () => {
  it.each(APPS)('%s is plain JavaScript with a package.json that names its dependencies at the root lockfile versions', (app) => {
    const dir = installed.get(app) as string;
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => !f.startsWith('node_modules'));
    expect(files).toContain('main.js');
    expect(files.filter((f) => /\.tsx?$/.test(f))).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const rootLock = JSON.parse(readFileSync(join(repoRoot(), 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> };
    expect(Object.keys(pkg.dependencies).length).toBeGreaterThan(0);
    for (const [name, version] of Object.entries(pkg.dependencies)) expect(`${name}@${version}`).toBe(`${name}@${rootLock.packages[`node_modules/${name}`].version}`);
    // No build or test tooling is shipped, and no app loads node-llama-cpp (only tools/llama-engine does).
    for (const dev of ['@swc/core', '@swc-node/register', 'vitest', 'typescript', 'nx', 'node-llama-cpp']) expect(existsSync(join(dir, 'node_modules', dev))).toBe(false);
  });

  it.each(SERVERS)(
    '$app starts with plain node on port 0, answers /healthz and exits 0 on SIGTERM',
    async ({ app, env }) => {
      const proc = await startBuilt(app, env);
      const [, base] = proc.readyMatch ?? [];
      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(await proc.stop('SIGTERM', EXIT_DEADLINE_MS)).toEqual({ code: 0, signal: null });
      expect(proc.stdout).toContain(`"msg":"llmgw-${app} shutting down"`);
      expect(proc.stderr).toBe('');
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'agent: the discover command is part of the build',
    async () => {
      const dir = installed.get('agent') as string;
      const { stdout } = await run(process.execPath, ['main.js', 'discover', '--help'], { cwd: dir, env: appEnv(dir, {}), timeout: BOOT_DEADLINE_MS });
      expect(stdout).toContain('llmgw-agent discover');
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'ctl: installed from its packed dist, `llmgw --version` and `llmgw status --json` answer against the built controller',
    async () => {
      const dir = installed.get('ctl') as string;
      const rootVersion = (JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')) as { version: string }).version;
      // The copy `npm ci` installed into runs as is...
      const { stdout: direct } = await run(process.execPath, ['main.js', '--version'], { cwd: dir, env: appEnv(dir, {}) });
      expect(direct).toBe(`llmgw ${rootVersion}\n`);
      // ...and the package npm packs from it installs a `llmgw` command.
      const tarball = (await npm(['pack', '--silent', '--pack-destination', work], dir)).trim().split('\n').pop() as string;
      const prefix = join(work, 'prefix');
      await npm(['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', join(work, tarball)], work);
      const llmgw = join(prefix, 'bin', 'llmgw');
      const cwd = mkdtempSync(join(work, 'cwd-'));
      const { stdout: version } = await run(llmgw, ['--version'], { cwd, env: appEnv(cwd, {}) });
      expect(version).toBe(`llmgw ${rootVersion}\n`);

      // No admin token configured: the controller serves loopback clients.
      const controller = await startBuilt('controller', CONTROLLER_ENV);
      const [, base] = controller.readyMatch ?? [];
      const { stdout: status } = await run(llmgw, ['status', '--json', '--controller', base], { cwd, env: appEnv(cwd, {}), timeout: BOOT_DEADLINE_MS });
      expect(JSON.parse(status)).toMatchObject({ controller: { leader: true } });
      expect(await controller.stop('SIGTERM', EXIT_DEADLINE_MS)).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );
});
