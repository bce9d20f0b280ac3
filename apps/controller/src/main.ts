// llmgw-controller: validate config, then serve until SIGTERM/SIGINT. Wiring only.
import 'reflect-metadata';
import { loadConfigOrExit } from '@llmgw/config';
import { createLogger, createMetricsRegistry, runMain, serveHttpApp } from '@llmgw/observability';
import { controllerConfigSchema } from './config/controller.config';
import { ControllerModule, serveControllerGrpc } from './controller.module';

const NAME = 'llmgw-controller';

runMain(NAME, async () => {
  const config = loadConfigOrExit(NAME, controllerConfigSchema);
  const logger = createLogger({ name: NAME, level: config.logLevel });
  const registry = createMetricsRegistry();
  await serveHttpApp({
    name: NAME,
    module: ControllerModule.forRoot({ config, logger, registry }),
    host: config.host,
    port: config.port,
    logger,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    beforeListen: async (app) => {
      await serveControllerGrpc(app, config, logger);
    },
  });
});
