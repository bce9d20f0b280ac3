import { spawn, type ChildProcess } from 'node:child_process';
import { LineSplitter } from './log-line.formatter';

/** How a process ended. */
export interface AppExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** What to start; `env` is the complete environment. */
export interface AppProcessSpec {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/**
 * One app started in a process group of its own, so a Ctrl-C in the terminal reaches only the
 * launcher (which stops the apps in order) and a signal sent to the group reaches whatever the
 * app started in it. Every line of stdout and stderr goes to `onLine`.
 */
export class AppProcess {
  readonly exited: Promise<AppExit>;
  #exit: AppExit | undefined;
  readonly #child: ChildProcess;

  constructor(
    readonly spec: AppProcessSpec,
    onLine: (stream: 'stdout' | 'stderr', line: string) => void,
  ) {
    this.#child = spawn(spec.command, [...spec.args], { env: { ...spec.env }, cwd: spec.cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of ['stdout', 'stderr'] as const) {
      const source = this.#child[stream];
      if (source === null) continue;
      const splitter = new LineSplitter();
      source.setEncoding('utf8');
      source.on('data', (chunk: string) => {
        for (const line of splitter.push(chunk)) onLine(stream, line);
      });
      source.on('end', () => {
        for (const line of splitter.flush()) onLine(stream, line);
      });
    }
    this.exited = new Promise<AppExit>((resolve) => {
      this.#child.once('error', (error) => {
        if (this.#child.pid !== undefined) return;
        onLine('stderr', `cannot start ${spec.command}: ${error.message}`);
        this.#exit = { code: null, signal: null };
        resolve(this.#exit);
      });
      this.#child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
    });
  }

  /** Process id (also its process group id); undefined when it never started. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** How it ended, once it has. */
  get exit(): AppExit | undefined {
    return this.#exit;
  }

  /** Sends `signal` to the app's process group; nothing when it is gone. */
  signalGroup(signal: NodeJS.Signals): void {
    if (this.#child.pid === undefined) return;
    try {
      process.kill(-this.#child.pid, signal);
    } catch {
      // The group is gone already.
    }
  }
}
