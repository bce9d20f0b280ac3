import { ConfigError, loadConfig, type Env } from '@llmgw/config';
import { DomainError } from '@llmgw/domain';
import { discoveryEnvSchema, discoveryOptions } from './discovery.config';
import type { DiscoveryLogger } from './discovery.logger';
import { DiscoveryService } from './discovery.service';
import type { CommandRunner } from './exec-file.runner';
import { formatInventoryTable } from './inventory.formatter';

const USAGE = `usage: llmgw-agent discover [--json]

Prints what this node would report to the controller: GPUs (nvidia-smi, or the fake inventory of
LLMGW_AGENT_FAKE_GPUS), CPU cores, memory, the weights cache (LLMGW_AGENT_CACHE_DIR), labels and
fabric. --json prints the inventory as JSON; unknown values are left out, never shown as 0.
`;

/** Where the command writes and what it reads; tests replace them, the CLI uses the real ones. */
export interface DiscoverCommandIo {
  readonly stdout?: (text: string) => void;
  readonly stderr?: (text: string) => void;
  /** Environment to read settings from; default this process's (through @llmgw/config). */
  readonly env?: Env;
  readonly runner?: CommandRunner;
}

/** Writes log lines to stderr so stdout stays the inventory alone (JSON stays parseable). */
function stderrLogger(write: (text: string) => void): DiscoveryLogger {
  // The messages say it all for a person at a terminal; the structured fields are for log pipelines.
  const line = (level: string) => (_fields: Record<string, unknown>, message: string) => write(`llmgw-agent discover: ${level}: ${message}\n`);
  return { info: line('info'), warn: line('warn') };
}

/**
 * `llmgw-agent discover [--json]`. `argv` is shaped like process.argv:
 * `[node, script, 'discover', ...flags]`. Resolves to the exit status: 0 printed, 1 discovery
 * failed (e.g. unreadable cache directory), 2 bad flags or configuration (every problem listed).
 */
export async function runDiscoverCommand(argv: string[], io: DiscoverCommandIo = {}): Promise<number> {
  const stdout = io.stdout ?? ((text: string) => void process.stdout.write(text));
  const stderr = io.stderr ?? ((text: string) => void process.stderr.write(text));

  // 1. Flags.
  const flags = argv.slice(3);
  if (flags.includes('--help') || flags.includes('-h')) {
    stdout(USAGE);
    return 0;
  }
  const unknown = flags.filter((f) => f !== '--json');
  if (unknown.length > 0) {
    stderr(`llmgw-agent discover: unknown argument(s) ${unknown.join(' ')}\n${USAGE}`);
    return 2;
  }
  const json = flags.includes('--json');

  // 2. Settings, validated once; every bad variable named.
  let settings;
  try {
    settings = io.env ? loadConfig(discoveryEnvSchema, io.env) : loadConfig(discoveryEnvSchema);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    stderr(`llmgw-agent discover: ${error.message}\n`);
    return 2;
  }

  // 3. Discover and print.
  const service = new DiscoveryService(discoveryOptions(settings), { logger: stderrLogger(stderr), ...(io.runner && { runner: io.runner }) });
  try {
    const inventory = await service.discover();
    stdout(json ? `${JSON.stringify(inventory, null, 2)}\n` : formatInventoryTable(inventory));
    return 0;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    stderr(`llmgw-agent discover: ${error.message}\n`);
    return 1;
  }
}
