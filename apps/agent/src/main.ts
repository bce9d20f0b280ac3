// llmgw-agent: `llmgw-agent` serves until SIGTERM/SIGINT; `llmgw-agent discover ...` runs the
// hardware discovery command (apps/agent/src/discovery) instead. Wiring only.
import 'reflect-metadata';
import { loadConfig, loadConfigOrExit } from '@llmgw/config';
import { createLogger, createMetricsRegistry, runMain, serveHttpApp } from '@llmgw/observability';
import { z } from 'zod';
import { agentConfigSchema } from './config/agent.config';
import { AgentModule } from './agent.module';
import { JOIN_REJECTED_EXIT_CODE } from './connection/controller.connection';

const NAME = 'llmgw-agent';
const DISCOVER_COMMAND = './discovery/discover.command';

interface DiscoverCommandModule {
  runDiscoverCommand(argv: string[]): unknown;
}

async function serve(): Promise<void> {
  const config = loadConfigOrExit(NAME, agentConfigSchema);
  const logger = createLogger({ name: NAME, level: config.logLevel });
  const registry = createMetricsRegistry();
  // What engines may inherit (filtered by LLMGW_AGENT_ENGINE_ENV); read through libs/config like every setting.
  const inheritedEnv = loadConfig(z.preprocess((raw) => ({ ...(raw as object) }), z.record(z.string(), z.string().optional())));
  const onFatal = (error: Error): void => {
    logger.fatal({ err: error.message }, 'stopping: the controller refused this agent');
    logger.flush();
    process.stderr.write(`${NAME}: ${error.message}\n`);
    // A distinct status the systemd unit does not restart on (RestartPreventExitStatus).
    setTimeout(() => process.exit(JOIN_REJECTED_EXIT_CODE), 50);
  };
  await serveHttpApp({
    name: NAME,
    module: AgentModule.forRoot({ config, logger, registry, inheritedEnv, onFatal }),
    host: config.host,
    port: config.port,
    logger,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
  });
}

async function discover(): Promise<void> {
  let command: DiscoverCommandModule;
  try {
    // Loaded on demand so serving never pays for it; only this module being absent is tolerated.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    command = require(DISCOVER_COMMAND) as DiscoverCommandModule;
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    if (e.code === 'MODULE_NOT_FOUND' && e.message.startsWith(`Cannot find module '${DISCOVER_COMMAND}'`)) {
      process.stderr.write(`${NAME}: the discover command is not part of this build\n`);
      process.exit(2);
    }
    throw error;
  }
  const code = await command.runDiscoverCommand(process.argv);
  if (typeof code === 'number') process.exitCode = code;
}

if (process.argv[2] === 'discover') runMain(`${NAME} discover`, discover);
else runMain(NAME, serve);
