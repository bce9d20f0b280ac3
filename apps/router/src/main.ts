// llmgw-router: validate config, then serve until SIGTERM/SIGINT. Wiring only.
import 'reflect-metadata';
import { loadConfigOrExit } from '@llmgw/config';
import { createLogger, createMetricsRegistry, runMain, serveHttpApp } from '@llmgw/observability';
import { routerConfigSchema } from './config/router.config';
import { RouterModule } from './router.module';

const NAME = 'llmgw-router';

runMain(NAME, async () => {
  const config = loadConfigOrExit(NAME, routerConfigSchema);
  const logger = createLogger({ name: NAME, level: config.logLevel });
  const registry = createMetricsRegistry();
  await serveHttpApp({
    name: NAME,
    module: RouterModule.forRoot({ config, logger, registry }),
    host: config.host,
    port: config.port,
    logger,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
  });
});
