import { execFile } from 'node:child_process';

/** Runs one program with arguments and returns its stdout; the port discovery depends on. */
export interface CommandRunner {
  /** Resolves with stdout when the program exits 0; rejects with a CommandError otherwise. */
  run(file: string, args: readonly string[], options: { timeoutMs: number }): Promise<string>;
}

export type CommandFailure = 'not-found' | 'exit' | 'timeout' | 'failed';

/** Why a command did not give output: missing, non-zero exit, killed after its timeout, or could not start. */
export class CommandError extends Error {
  constructor(
    readonly file: string,
    readonly failure: CommandFailure,
    message: string,
    readonly exitCode?: number,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

const MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

/** First non-blank line of a program's output, to say why it failed without dumping it all. */
function firstLine(...outputs: string[]): string {
  for (const out of outputs) {
    const line = out.split('\n').find((l) => l.trim() !== '');
    if (line) return line.trim().slice(0, 300);
  }
  return '';
}

/**
 * CommandRunner over `execFile`: no shell, the program looked up on `PATH` (of `env` when
 * given, else this process's), killed with SIGKILL after `timeoutMs`.
 */
export class ExecFileCommandRunner implements CommandRunner {
  constructor(private readonly env?: NodeJS.ProcessEnv) {}

  run(file: string, args: readonly string[], options: { timeoutMs: number }): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        file,
        [...args],
        { shell: false, timeout: options.timeoutMs, killSignal: 'SIGKILL', maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8', windowsHide: true, ...(this.env && { env: this.env }) },
        (error, stdout, stderr) => {
          if (!error) return resolve(stdout);
          const err = error as NodeJS.ErrnoException & { killed?: boolean; signal?: NodeJS.Signals | null; code?: string | number };
          const said = firstLine(stderr, stdout);
          if (err.code === 'ENOENT') reject(new CommandError(file, 'not-found', `${file}: not found on PATH`));
          else if (err.killed && err.signal === 'SIGKILL') reject(new CommandError(file, 'timeout', `${file}: no answer within ${options.timeoutMs} ms`));
          else if (typeof err.code === 'number') reject(new CommandError(file, 'exit', `${file}: exited with code ${err.code}${said ? `: ${said}` : ''}`, err.code));
          else if (err.signal) reject(new CommandError(file, 'failed', `${file}: killed by ${err.signal}${said ? `: ${said}` : ''}`));
          else reject(new CommandError(file, 'failed', `${file}: ${err.message}`));
        },
      );
    });
  }
}
