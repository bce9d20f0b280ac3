// Runs `llmgw` commands in-process with captured output and a controlled environment.
import { runCli } from '../cli';
import type { CliCommand, CliIo } from '../cli-io';

export interface CliResult {
  code: number;
  out: string;
  err: string;
}

/**
 * Runs argv against `commands` with stdout/stderr captured. The environment is `env` only (so
 * the developer's LLMGW_* variables and config file cannot leak in: HOME points at `home`).
 */
export async function runCtl(
  commands: readonly CliCommand[],
  argv: string[],
  options: { env?: Record<string, string>; cwd?: string; isTTY?: boolean; home?: string } = {},
): Promise<CliResult> {
  let out = '';
  let err = '';
  const io: CliIo = {
    out: (t) => (out += t),
    err: (t) => (err += t),
    isTTY: options.isTTY ?? false,
    cwd: options.cwd ?? process.cwd(),
    env: { HOME: options.home ?? '/nonexistent-llmgw-test-home', ...options.env },
  };
  const code = await runCli(commands, argv, io);
  return { code, out, err };
}
