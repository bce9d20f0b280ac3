import { EXIT_USAGE, UsageError, type CliCommand, type CliIo } from './cli-io';
import { CLI_VERSION } from './version';

/** Finds the command whose path matches the longest prefix of argv. */
export function findCommand(commands: readonly CliCommand[], argv: readonly string[]): CliCommand | undefined {
  let best: CliCommand | undefined;
  for (const c of commands) {
    if (c.path.length <= argv.length && c.path.every((w, i) => argv[i] === w)) {
      if (!best || c.path.length > best.path.length) best = c;
    }
  }
  return best;
}

export function usageText(commands: readonly CliCommand[]): string {
  const lines = ['usage: llmgw <command> [options]', '', 'commands:'];
  for (const c of commands) lines.push(`  ${c.usage.padEnd(60)} ${c.summary}`);
  lines.push(
    '',
    'commands that talk to the controller or the catalog API take --controller URL, --catalog URL,',
    '--token T and --config FILE; else LLMGW_CONTROLLER_URL, LLMGW_CATALOG_URL, LLMGW_ADMIN_TOKEN;',
    'else ~/.config/llmgw/config.yaml (controller:, catalog:, token:). Every command takes --json.',
    '`llmgw --version` prints the version.',
    'exit status: 0 ok, 1 failure, 2 usage error.',
  );
  return lines.join('\n') + '\n';
}

/** Runs the CLI for argv (without node and script) and returns the exit code. Never throws. */
export async function runCli(commands: readonly CliCommand[], argv: string[], io: CliIo): Promise<number> {
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    (argv.length === 0 ? io.err : io.out)(usageText(commands));
    return argv.length === 0 ? EXIT_USAGE : 0;
  }
  if (argv.length === 1 && (argv[0] === '--version' || argv[0] === '-V')) {
    io.out(`llmgw ${CLI_VERSION}\n`);
    return 0;
  }
  const cmd = findCommand(commands, argv);
  if (!cmd) {
    io.err(`llmgw: unknown command '${argv.join(' ')}'\n\n${usageText(commands)}`);
    return EXIT_USAGE;
  }
  try {
    return await cmd.run(argv.slice(cmd.path.length), io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`llmgw: ${e.message}\nusage: ${cmd.usage}\n`);
      return EXIT_USAGE;
    }
    // Node's parseArgs throws TypeError with code ERR_PARSE_ARGS_* for unknown or malformed flags.
    const code = (e as { code?: string }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) {
      io.err(`llmgw: ${(e as Error).message}\nusage: ${cmd.usage}\n`);
      return EXIT_USAGE;
    }
    io.err(`llmgw: ${(e as Error).message ?? String(e)}\n`);
    return 1;
  }
}
