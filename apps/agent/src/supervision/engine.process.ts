import { spawn } from 'node:child_process';
import { isSameLiveProcess, readProcStat } from '../state/proc-stat.reader';

/** How an engine process ended. An adopted engine is not the agent's child: its status is unknown. */
export interface EngineExit {
  readonly code?: number;
  readonly signal?: string;
  /** False when the agent could not see the status (adopted engines, found gone by polling). */
  readonly known: boolean;
}

/** A running engine: one the agent spawned, or one it re-adopted after a restart. */
export interface EngineProcess {
  readonly pid: number;
  /** `/proc/<pid>/stat` field 22; empty when the process was gone before it could be read. */
  readonly startTime: string;
  readonly adopted: boolean;
  /** Resolves once the process has ended. */
  readonly exited: Promise<EngineExit>;
  /** True while the very same process (pid and start time) runs. */
  isRunning(): boolean;
  /**
   * Sends `signal` to the engine's process group (what the engine started too), but only while
   * the pid still belongs to this engine; a group already gone is ignored.
   */
  signal(signal: NodeJS.Signals): void;
  /** Stops watching the process; it keeps running (the agent is shutting down, not the engine). */
  detach(): void;
}

/** What to run: an argv array with its environment, output going to `logFd`. */
export interface EngineCommand {
  readonly command: string;
  readonly args: readonly string[];
  /** The complete environment (nothing is inherited implicitly). */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** Open file descriptor the process writes stdout and stderr to. */
  readonly logFd: number;
}

/**
 * Starts `command` without a shell, as the leader of a new process group (and session), its
 * output going straight to the log file. Not tied to the agent: it survives the agent's exit.
 * Rejects when the program cannot be started (missing, not executable).
 */
export function spawnEngine(cmd: EngineCommand): Promise<EngineProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd.command, [...cmd.args], {
      cwd: cmd.cwd,
      env: { ...cmd.env },
      detached: true,
      stdio: ['ignore', cmd.logFd, cmd.logFd],
      shell: false,
    });
    let exitResult: EngineExit | undefined;
    let onExit: ((exit: EngineExit) => void) | undefined;
    const exited = new Promise<EngineExit>((done) => (onExit = done));
    child.once('exit', (code, signal) => {
      exitResult = { ...(code !== null && { code }), ...(signal !== null && { signal }), known: true };
      onExit?.(exitResult);
    });
    child.once('error', (error) => {
      if (child.pid === undefined) reject(new Error(`cannot start ${cmd.command}: ${error.message}`));
    });
    child.once('spawn', () => {
      child.unref();
      const pid = child.pid as number;
      const startTime = readProcStat(pid)?.startTime ?? '';
      resolve({
        pid,
        startTime,
        adopted: false,
        exited,
        isRunning: () => exitResult === undefined,
        signal: (signal) => {
          if (exitResult === undefined || groupAlive(pid)) signalGroup(pid, signal);
        },
        detach: () => child.removeAllListeners('exit'),
      });
    });
  });
}

/**
 * Watches an engine started by an earlier agent process: it is not this process's child, so its
 * end is found by polling `/proc` every `pollMs` — gone, a zombie, or a pid now held by another
 * process (another start time) all count as exited, with the status unknown.
 */
export function adoptEngine(pid: number, startTime: string, pollMs: number): EngineProcess {
  let done = false;
  let timer: NodeJS.Timeout | undefined;
  let finish: ((exit: EngineExit) => void) | undefined;
  const exited = new Promise<EngineExit>((resolve) => (finish = resolve));
  const running = (): boolean => !done && isSameLiveProcess(pid, startTime);
  const poll = (): void => {
    if (done) return;
    if (!isSameLiveProcess(pid, startTime)) {
      done = true;
      finish?.({ known: false });
      return;
    }
    timer = setTimeout(poll, pollMs);
    timer.unref();
  };
  poll();
  return {
    pid,
    startTime,
    adopted: true,
    exited,
    isRunning: running,
    signal: (signal) => {
      // Never signal a pid that is no longer this engine: after a reuse it is someone else's.
      // Once the leader is gone its pid may be someone else's, so an adopted engine's group is
      // signalled only through a leader the agent can still recognise.
      if (isSameLiveProcess(pid, startTime)) signalGroup(readProcStat(pid)?.pgrp === pid ? pid : undefined, signal, pid);
    },
    detach: () => {
      done = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * Signals the process group `pgid` (every process the engine started). When `pgid` is not
 * given, signals the single process `pid` (an engine that does not lead its own group).
 */
function signalGroup(pgid: number | undefined, signal: NodeJS.Signals, pid?: number): void {
  try {
    if (pgid !== undefined) process.kill(-pgid, signal);
    else if (pid !== undefined) process.kill(pid, signal);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ESRCH') throw error;
  }
}

/** True while any process is left in group `pgid` (signal 0 probes without sending). */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
