// The README quickstart, followed literally: start the launcher (what `npm start` runs), wait for
// the curl line it prints, run that line in a shell, then Ctrl-C (SIGINT to its process group,
// as a terminal sends it) and check it exits 0 with no process left behind.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, repoRoot, runTsEntry, spawnProcess, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { ProcessTreeTracker } from '../../launcher/src/process-tree';
import { cmdline, launcherEnv } from './cluster.harness';

const run = promisify(execFile);
const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-quickstart-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function portsEnv(): Promise<Record<string, string>> {
  const vars = ['LLMGW_ROUTER_PORT', 'LLMGW_CONTROLLER_PORT', 'LLMGW_CONTROLLER_GRPC_PORT', 'LLMGW_CATALOG_PORT', 'LLMGW_AGENT_PORT'];
  const out: Record<string, string> = {};
  for (const v of vars) out[v] = String(await freePort());
  return out;
}

describe('npm start (tools/launcher)', () => {
  it('is what `npm start` runs', () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    expect(pkg.scripts?.start).toBe('node tools/run.cjs tools/launcher/src/main.ts');
  });

  it(
    'serves the printed curl example from the real CPU engine, and Ctrl-C leaves nothing running',
    async () => {
      const tracker = new ProcessTreeTracker();
      const launcher = await spawnProcess({
        ...runTsEntry('tools/launcher/src/main.ts'),
        name: 'launcher',
        cleanEnv: true,
        env: { ...launcherEnv(), LLMGW_DATA_DIR: dataDir, ...(await portsEnv()) },
        readyWhen: { check: (proc) => (tracker.addRoot(proc.pid), true) },
      });
      const timer = setInterval(() => tracker.refresh(), 200);
      try {
        const [curl] = await launcher.waitForStdout(/^curl .+$/m, 180_000).catch((error: Error) => {
          throw new Error(`${error.message}${launcher.describeOutput()}`);
        });
        expect(launcher.stdout).toMatch(/OpenAI base URL: http:\/\/127\.0\.0\.1:\d+\/v1/);
        tracker.refresh();
        expect(tracker.alive().length, 'launcher, four apps and an engine').toBeGreaterThanOrEqual(6);

        const { stdout } = await run('bash', ['-c', curl], { timeout: 60_000 });
        const body = JSON.parse(stdout) as { object: string; choices: { message: { content: string }; finish_reason: string }[]; usage: { completion_tokens: number } };
        expect(body.object).toBe('chat.completion');
        expect(typeof body.choices[0].message.content).toBe('string');
        expect(body.usage.completion_tokens).toBeGreaterThan(0);

        // What the store and the tokens sit in is the owner's alone.
        const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8);
        expect(mode(dataDir)).toBe('700');
        for (const f of ['llmgw.db', 'llmgw.db-wal', 'llmgw.db-shm', 'admin-token', 'join-token', 'router-token', 'agent/node-secret', 'tls/ca.key', 'tls/controller.key']) expect([f, mode(join(dataDir, f))]).toEqual([f, '600']);
        expect(mode(join(dataDir, 'tls'))).toBe('700');
        expect(launcher.stdout).toContain('gRPC over TLS: created the local CA');
        // The controller runs with the join and router tokens the launcher generated (never in
        // insecure mode), and no token or node secret is printed.
        expect(launcher.stdout).not.toContain('INSECURE_NO_AUTH');
        for (const f of ['admin-token', 'join-token', 'router-token', 'agent/node-secret']) expect(launcher.stdout).not.toContain(readFileSync(join(dataDir, f), 'utf8').trim());

        // One app dying does not stop the cluster: the launcher says so, starts it again, and the
        // same curl works once more.
        const [, routerPid] = /^\[llmgw\]\s+router started \(pid (\d+);/m.exec(launcher.stdout) ?? [];
        expect(routerPid, 'the launcher names each app pid').toBeDefined();
        process.kill(Number(routerPid), 'SIGKILL');
        await launcher.waitForStdout(/router exited unexpectedly \(signal SIGKILL\); restarting it in 1 s/, 30_000);
        await launcher.waitForStdout(new RegExp(`router started \\(pid (?!${routerPid}\\b)\\d+`), 30_000);
        await waitFor(
          async () => {
            const again = await run('bash', ['-c', curl], { timeout: 30_000 }).catch(() => undefined);
            return again !== undefined && (JSON.parse(again.stdout) as { object?: string }).object === 'chat.completion';
          },
          { deadlineMs: 60_000, intervalMs: 500, message: 'the restarted router serves the curl example' },
        );
        tracker.refresh();

        // Ctrl-C under `npm start`: the terminal signals the whole group, and npm forwards it to
        // the launcher once more. Both arrive together; that is one Ctrl-C, a clean stop.
        tracker.refresh();
        launcher.signal('SIGINT');
        process.kill(launcher.pid, 'SIGINT');
        expect(await launcher.waitForExit(60_000)).toEqual({ code: 0, signal: null });
        clearInterval(timer);
        const left = tracker.alive();
        expect(left.map((p) => `${p.pid} ${cmdline(p.pid).join(' ') || p.comm}`), 'processes left running').toEqual([]);
        expect(launcher.stdout).toMatch(/^\[llmgw\]\s+stopped$/m);
        expect(launcher.stdout).not.toContain('killing everything');
        // Logs are one stream, each line prefixed with its app.
        for (const app of ['controller', 'router', 'agent', 'catalog']) expect(launcher.stdout).toMatch(new RegExp(`^\\[${app}\\]\\s`, 'm'));
      } finally {
        clearInterval(timer);
        await launcher.stop('SIGKILL', 1_000);
        tracker.signalAll('SIGKILL');
      }
    },
    300_000,
  );

  it('refuses to start when a port is taken, naming the port and the variable', async () => {
    const server: Server = await new Promise((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => resolve(s));
    });
    const port = (server.address() as { port: number }).port;
    try {
      const launcher = await spawnProcess({
        ...runTsEntry('tools/launcher/src/main.ts'),
        name: 'launcher (port taken)',
        cleanEnv: true,
        env: { ...launcherEnv(), LLMGW_DATA_DIR: dataDir, ...(await portsEnv()), LLMGW_ROUTER_PORT: String(port) },
      });
      expect(await launcher.waitForExit(60_000)).toEqual({ code: 1, signal: null });
      expect(launcher.stdout).toContain(`port ${port} on 127.0.0.1 for the router is already in use: stop whatever holds it, or set LLMGW_ROUTER_PORT to a free port`);
      expect(launcher.stdout).not.toMatch(/^\[(router|controller|agent|catalog)\]/m);
    } finally {
      await new Promise((r) => server.close(r));
    }
  }, 90_000);
});
