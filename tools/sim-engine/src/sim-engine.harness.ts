// Test support for this tool's e2e tests: spawn the simulator as a real process, wait for its
// announcements with a deadline, always clean up. (libs/testing grows the generic version.)
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..', '..');
const RUN_CJS = resolve(REPO_ROOT, 'tools', 'run.cjs');
const MAIN_TS = resolve(REPO_ROOT, 'tools', 'sim-engine', 'src', 'main.ts');

/** How a process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A spawned simulator process. */
export interface SimProcess {
  readonly child: ChildProcess;
  /** Resolves once the process has exited. */
  readonly exited: Promise<Exit>;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout line matching `re` (also one printed earlier); rejects at the deadline or on exit. */
  waitForLine(re: RegExp, deadlineMs?: number): Promise<RegExpMatchArray>;
  /** Sends `signal` (SIGKILL after `graceMs`) and resolves with how the process ended. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<Exit>;
}

/** A simulator that announced its listening address. */
export interface StartedSim extends SimProcess {
  port: number;
  /** `http://127.0.0.1:PORT` */
  url: string;
}

const live = new Set<SimProcess>();

/** Spawns `node tools/run.cjs tools/sim-engine/src/main.ts ...args` without waiting for anything. */
export function spawnSimEngine(args: readonly string[]): SimProcess {
  const child = spawn(process.execPath, [RUN_CJS, MAIN_TS, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const w of waiters) w();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<Exit>((res) => child.once('exit', (code, signal) => res({ code, signal })));
  let hasExited = false;
  void exited.then(() => {
    hasExited = true;
    for (const w of waiters) w();
  });

  const proc: SimProcess = {
    child,
    exited,
    stdout: () => out,
    stderr: () => err,
    waitForLine(re, deadlineMs = 20_000) {
      return new Promise((resolveLine, reject) => {
        const lineRe = new RegExp(re.source, re.flags.includes('m') ? re.flags : `${re.flags}m`);
        const check = (): void => {
          const m = lineRe.exec(out);
          if (m) done(() => resolveLine(m));
          else if (hasExited) done(() => reject(new Error(`sim-engine exited before printing ${re}; stdout:\n${out}\nstderr:\n${err}`)));
        };
        const timer = setTimeout(() => done(() => reject(new Error(`no line matching ${re} within ${deadlineMs} ms; stdout:\n${out}\nstderr:\n${err}`))), deadlineMs);
        const done = (settle: () => void): void => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
    async stop(signal = 'SIGTERM', graceMs = 5_000) {
      if (!hasExited) {
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }
      live.delete(proc);
      return exited;
    },
  };
  live.add(proc);
  void exited.then(() => live.delete(proc));
  return proc;
}

/** Spawns the simulator and waits (with a deadline) for its `sim-engine listening on` line. */
export async function startSimEngine(args: readonly string[], deadlineMs = 20_000): Promise<StartedSim> {
  const proc = spawnSimEngine(args);
  try {
    const m = await proc.waitForLine(/^sim-engine listening on http:\/\/([^\s:]+|\[[^\]]+\]):(\d+)$/, deadlineMs);
    const port = Number(m[2]);
    return Object.assign(proc, { port, url: `http://127.0.0.1:${port}` });
  } catch (err) {
    await proc.stop('SIGKILL');
    throw err;
  }
}

/** Stops every simulator this module spawned that is still running. For afterAll. */
export async function stopAllSimEngines(): Promise<void> {
  await Promise.all([...live].map((p) => p.stop('SIGKILL', 0)));
}

/** A TCP port that was free a moment ago (for tests that must know the port before the process binds). */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

/** Polls `check` every `intervalMs` until it returns true; rejects naming `what` at the deadline. */
export async function waitUntil(check: () => boolean | Promise<boolean>, what: string, deadlineMs = 10_000, intervalMs = 25): Promise<void> {
  const end = Date.now() + deadlineMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
