import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { waitFor } from './wait-for';

/** How a process exited: `code` when it exited, `signal` when a signal ended it. */
export interface ExitResult {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** An HTTP readiness probe: ready once a GET answers `status` (default 200). */
export type HttpReadiness =
  | { url: string | ((proc: SpawnedProcess) => string); status?: number }
  | { path: string; port: number; host?: string; status?: number };

/**
 * When a spawned process counts as ready. Checks run in order — output first, then HTTP — and
 * all given must pass. Without any, the process is ready once spawned.
 */
export interface ReadyWhen {
  /** Accumulated stdout matches; the match is kept as `readyMatch`. */
  stdoutMatch?: RegExp;
  /** Accumulated stderr matches; the match is kept as `readyMatch` unless stdoutMatch set it. */
  stderrMatch?: RegExp;
  http?: HttpReadiness;
  /** Any other probe (e.g. a protocol PING); ready once it returns true. A throw counts as not yet. */
  check?: (proc: SpawnedProcess) => boolean | Promise<boolean>;
  /** Names `check` in the error message (default "readiness check"). */
  checkName?: string;
}

/** What to run and when it is ready. Times in milliseconds. */
export interface SpawnOptions {
  command: string;
  args?: readonly string[];
  /** Merged over this process's environment; an `undefined` value removes the variable. */
  env?: Record<string, string | undefined>;
  /** Start from an empty environment (plus `env`) instead of this process's. */
  cleanEnv?: boolean;
  cwd?: string;
  readyWhen?: ReadyWhen;
  /** How long readiness may take (default 15 000 ms); past it the process is killed and spawnProcess rejects. */
  deadlineMs?: number;
  /** A label for error messages (default: the command and first argument). */
  name?: string;
}

const MAX_OUTPUT_CHARS = 8 * 1024 * 1024;
const live = new Set<SpawnedProcess>();
let exitHookInstalled = false;

/**
 * A process started by {@link spawnProcess}, leader of its own process group, so signals reach
 * whatever it started too. Every handle is registered until it has been stopped: see
 * {@link stopAllSpawned}; on this process's exit anything left is SIGKILLed.
 */
export class SpawnedProcess {
  /** The match of `readyWhen.stdoutMatch`/`stderrMatch`, e.g. to read a port from a "listening" line. */
  readyMatch: RegExpMatchArray | undefined;
  private out = '';
  private err = '';
  private result: ExitResult | undefined;
  private readonly exitedPromise: Promise<ExitResult>;

  constructor(
    private readonly child: ChildProcess,
    readonly name: string,
  ) {
    child.stdout?.setEncoding('utf8');
    child.stderr?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => (this.out = keepTail(this.out + chunk)));
    child.stderr?.on('data', (chunk: string) => (this.err = keepTail(this.err + chunk)));
    this.exitedPromise = new Promise<ExitResult>((resolve) => {
      let settled = false;
      const settle = (): void => {
        if (settled || this.result === undefined) return;
        settled = true;
        resolve(this.result);
      };
      child.once('exit', (code, signal) => {
        this.result = { code, signal };
        // Output still in the pipes arrives before 'close'; a grandchild holding the pipe open
        // must not hold up the exit, so wait for 'close' only briefly.
        setTimeout(settle, 1_000).unref();
      });
      child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
        this.result ??= { code, signal };
        settle();
      });
      child.on('error', (error) => {
        if (child.pid !== undefined) return;
        this.err += `spawn failed: ${error.message}\n`;
        this.result = { code: null, signal: null };
        settle();
      });
    });
  }

  /** Process id, also the process group id. */
  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.name}: never started`);
    return this.child.pid;
  }

  /** Everything written to stdout so far (the last 8 MiB). */
  get stdout(): string {
    return this.out;
  }

  /** Everything written to stderr so far (the last 8 MiB). */
  get stderr(): string {
    return this.err;
  }

  /** The exit result once the process has exited, else undefined. */
  get exit(): ExitResult | undefined {
    return this.result;
  }

  /** Resolves when the process has exited (and its output has been read). */
  get exited(): Promise<ExitResult> {
    return this.exitedPromise;
  }

  /** Waits for the process to exit by itself; rejects (without killing it) after `deadlineMs`. */
  async waitForExit(deadlineMs = 10_000): Promise<ExitResult> {
    const result = await raceDeadline(this.exitedPromise, deadlineMs);
    if (result === undefined) throw new Error(`${this.name}: still running after ${deadlineMs} ms${this.describeOutput()}`);
    return result;
  }

  /** Waits until stdout matches `pattern`; rejects with the output seen if it has not after `deadlineMs`. */
  async waitForStdout(pattern: RegExp, deadlineMs = 10_000): Promise<RegExpMatchArray> {
    return waitFor(() => this.out.match(pattern), { deadlineMs, message: `${this.name}: stdout never matched ${pattern}` });
  }

  /** Sends `signal` to the whole process group; a group that is gone is ignored. */
  signal(signal: NodeJS.Signals): void {
    signalGroup(this.child.pid, signal);
  }

  /**
   * Sends `signal` (default SIGTERM) to the group, waits up to `graceMs` for the process to exit,
   * then SIGKILLs the group. Anything of the group still running afterwards is SIGKILLed too.
   * Returns how the process exited.
   */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5_000): Promise<ExitResult> {
    if (this.result === undefined) {
      this.signal(signal);
      if ((await raceDeadline(this.exitedPromise, graceMs)) === undefined) this.signal('SIGKILL');
    }
    const result = await this.exitedPromise;
    this.signal('SIGKILL');
    live.delete(this);
    return result;
  }

  /** SIGKILLs the whole group at once (a crash, not a shutdown) and waits for the exit. */
  async kill9(): Promise<ExitResult> {
    return this.stop('SIGKILL', 5_000);
  }

  /** The last lines of stdout and stderr, for error messages. */
  describeOutput(): string {
    const tail = (text: string): string => text.split('\n').slice(-20).join('\n');
    return `\n--- stdout (tail) ---\n${tail(this.out)}\n--- stderr (tail) ---\n${tail(this.err)}`;
  }

  /** @internal registry bookkeeping for the exit hook */
  static killAllNow(): void {
    for (const proc of live) signalGroup(proc.child.pid, 'SIGKILL');
    live.clear();
  }
}

/**
 * Starts `command` in its own process group, collects its output and resolves once `readyWhen`
 * holds. If the process exits first, or the deadline passes, the group is killed and the promise
 * rejects with the reason and the output tail. The handle is registered for cleanup.
 */
export async function spawnProcess(options: SpawnOptions): Promise<SpawnedProcess> {
  installExitHook();
  const args = [...(options.args ?? [])];
  const name = options.name ?? [options.command, ...args.slice(0, 1)].join(' ');
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...(options.cleanEnv ? {} : process.env), ...(options.env ?? {}) })) {
    if (value !== undefined) env[key] = value;
  }
  const child = spawn(options.command, args, {
    cwd: options.cwd,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = new SpawnedProcess(child, name);
  live.add(proc);
  if (child.pid === undefined) {
    await proc.exited;
    live.delete(proc);
    throw new Error(`${name}: ${proc.stderr.trim() || 'spawn failed'}`);
  }
  const deadlineMs = options.deadlineMs ?? 15_000;
  const stopWaiting = new AbortController();
  void proc.exited.then(() => stopWaiting.abort('process exited'));
  try {
    await raceExit(proc, waitReady(proc, options.readyWhen ?? {}, deadlineMs, stopWaiting.signal), deadlineMs);
  } catch (error) {
    await proc.kill9();
    throw error;
  } finally {
    stopWaiting.abort('done');
  }
  return proc;
}

/** Stops every process spawned and not yet stopped (SIGTERM, then SIGKILL after `graceMs`). Use in afterAll/afterEach. */
export async function stopAllSpawned(graceMs = 2_000): Promise<void> {
  await Promise.all([...live].map((proc) => proc.stop('SIGTERM', graceMs)));
}

/** How many spawned processes are still registered (not yet stopped). */
export function spawnedCount(): number {
  return live.size;
}

/**
 * True when a process with this id is running. A zombie (exited, not yet reaped by its parent)
 * counts as gone: it runs nothing and holds no port.
 */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    // /proc/<pid>/stat: "pid (comm) S ..."; comm may contain spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

async function waitReady(proc: SpawnedProcess, ready: ReadyWhen, deadlineMs: number, signal: AbortSignal): Promise<void> {
  const started = performance.now();
  const left = (): number => Math.max(1, deadlineMs - (performance.now() - started));
  if (ready.stdoutMatch) {
    const pattern = ready.stdoutMatch;
    proc.readyMatch = await waitFor(() => proc.stdout.match(pattern), {
      deadlineMs: left(),
      intervalMs: 10,
      signal,
      message: `${proc.name}: stdout never matched ${pattern}`,
    });
  }
  if (ready.stderrMatch) {
    const pattern = ready.stderrMatch;
    const match = await waitFor(() => proc.stderr.match(pattern), {
      deadlineMs: left(),
      intervalMs: 10,
      signal,
      message: `${proc.name}: stderr never matched ${pattern}`,
    });
    proc.readyMatch ??= match;
  }
  if (ready.http) {
    const probe = ready.http;
    const url =
      'url' in probe
        ? typeof probe.url === 'function'
          ? probe.url(proc)
          : probe.url
        : `http://${probe.host ?? '127.0.0.1'}:${probe.port}${probe.path}`;
    const status = probe.status ?? 200;
    await waitFor(
      async () => {
        const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        await res.arrayBuffer();
        if (res.status !== status) throw new Error(`answered HTTP ${res.status}`);
        return true;
      },
      { deadlineMs: left(), intervalMs: 50, signal, message: `${proc.name}: GET ${url} never answered ${status}` },
    );
  }
  if (ready.check) {
    const check = ready.check;
    await waitFor(async () => (await check(proc)) === true, {
      deadlineMs: left(),
      intervalMs: 20,
      signal,
      message: `${proc.name}: ${ready.checkName ?? 'readiness check'} never passed`,
    });
  }
}

/** Rejects as soon as the process exits before `work` finishes, naming the exit and the output. */
async function raceExit(proc: SpawnedProcess, work: Promise<void>, deadlineMs: number): Promise<void> {
  let exited = false;
  const exitFirst = proc.exited.then((result) => {
    exited = true;
    return result;
  });
  try {
    const outcome = await Promise.race([work.then(() => 'ready' as const), exitFirst]);
    if (outcome !== 'ready') {
      throw new Error(
        `${proc.name}: exited before it was ready (code ${outcome.code}, signal ${outcome.signal})${proc.describeOutput()}`,
      );
    }
  } catch (error) {
    if (exited || !(error instanceof Error) || error.message.includes('--- stdout')) throw error;
    throw new Error(`${error.message} (deadline ${deadlineMs} ms)${proc.describeOutput()}`);
  } finally {
    work.catch(() => undefined);
  }
}

function signalGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ESRCH' && code !== 'EPERM') throw error;
  }
}

function raceDeadline<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

function keepTail(text: string): string {
  return text.length > MAX_OUTPUT_CHARS ? text.slice(text.length - MAX_OUTPUT_CHARS) : text;
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => SpawnedProcess.killAllNow());
  // A signal that would end this process skips 'exit' handlers: clean up, then let the signal
  // take its default course. Only where nobody else handles that signal already.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    if (process.listenerCount(signal) > 0) continue;
    process.once(signal, () => {
      SpawnedProcess.killAllNow();
      process.kill(process.pid, signal);
    });
  }
}

/**
 * Sends SIGKILL to every process of this user whose command line contains `text` (a test's own
 * temporary directory, say), except this process; returns their pids. For processes a test
 * started only indirectly and that outlive their parent by design: the engines of an agent the
 * test stopped or killed are detached, and nothing else would end them.
 */
export function killProcessesMentioning(text: string): number[] {
  if (text.length < 8) throw new Error(`killProcessesMentioning: "${text}" is too short to name only a test's own processes`);
  const killed: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
    } catch {
      continue; // gone meanwhile, or not ours to read
    }
    if (!cmdline.includes(text)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // Gone meanwhile, or another user's.
    }
  }
  return killed;
}
