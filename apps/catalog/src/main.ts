// llmgw-catalog: validate config, then serve until SIGTERM/SIGINT. Wiring only.
import 'reflect-metadata';
import { loadConfigOrExit } from '@llmgw/config';
import { createLogger, createMetricsRegistry, runMain, serveHttpApp } from '@llmgw/observability';
import { catalogConfigSchema } from './config/catalog.config';
import { CatalogModule } from './catalog.module';

const NAME = 'llmgw-catalog';

runMain(NAME, async () => {
  const config = loadConfigOrExit(NAME, catalogConfigSchema);
  const logger = createLogger({ name: NAME, level: config.logLevel });
  const registry = createMetricsRegistry();
  if (config.adminToken === undefined) {
    logger.warn('LLMGW_CATALOG_ADMIN_TOKEN is not set: every catalog API request will be refused (401)');
  }
  await serveHttpApp({
    name: NAME,
    module: CatalogModule.forRoot({ config, logger, registry }),
    host: config.host,
    port: config.port,
    logger,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
    // The catalog API reads bodies itself: JSON and YAML, its own size limit, problem+json errors.
    bodyParser: false,
  });
});
