/**
 * What a `llmgw` command may touch: output streams, whether stdout is a terminal, and the
 * process environment as read once by main. Commands return their exit code:
 * 0 ok, 1 failure, 2 usage error.
 */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** True when stdout is a terminal: colour and progress animation only then. */
  readonly isTTY: boolean;
  /** Current directory for relative paths. */
  readonly cwd: string;
  /**
   * Environment the connection settings are read from, always through `@llmgw/config`;
   * absent = this process's environment. Tests pass their own.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A sub-command: parses its own argv (everything after its name) and returns an exit code. */
export interface CliCommand {
  /** Words that select it, e.g. `['catalog', 'validate']`. */
  readonly path: readonly string[];
  readonly summary: string;
  /** One usage line, e.g. `llmgw catalog validate -f FILE [--json]`. */
  readonly usage: string;
  run(argv: string[], io: CliIo): Promise<number>;
}

/** Thrown by a command's argument parsing; main prints it with the usage and exits 2. */
export class UsageError extends Error {}
