import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { PinoNestLogger } from './nest-logger.adapter';

/** What {@link serveHttpApp} needs; times in milliseconds. */
export interface ServeHttpAppOptions {
  /** Program name, e.g. `llmgw-router`; starts the "listening on" line. */
  name: string;
  /** The app's root module (a class or `forRoot(...)` result). */
  module: Parameters<typeof NestFactory.create>[0];
  host: string;
  /** 0 lets the OS choose; the line printed carries the real port. */
  port: number;
  logger: Logger;
  /** After SIGTERM/SIGINT, exit with status 1 if closing takes longer than this. */
  shutdownTimeoutMs: number;
  /** Runs before the HTTP port is bound: a hybrid app connects and starts its microservices here. */
  beforeListen?: (app: INestApplication) => Promise<void>;
  /**
   * Nest's JSON/urlencoded body parsers (default true). False leaves request bodies unread, for
   * an app that reads them itself (its own media types and size limit, its own error bodies).
   */
  bodyParser?: boolean;
}

/** The running app and the address it listens on. */
export interface ServingApp {
  app: INestApplication;
  url: string;
  port: number;
}

/**
 * Creates the Nest app on Express with Nest's logs routed to pino, closes it on SIGTERM/SIGINT
 * and exits 0 (or 1 past the shutdown deadline), listens, and logs
 * `<name> listening on http://HOST:PORT`.
 */
export async function serveHttpApp(options: ServeHttpAppOptions): Promise<ServingApp> {
  const { logger } = options;
  const app = await NestFactory.create(options.module, new ExpressAdapter(), {
    logger: new PinoNestLogger(logger),
    abortOnError: false,
    bodyParser: options.bodyParser ?? true,
  });
  // Say nothing about the server stack to whoever connects.
  (app.getHttpAdapter().getInstance() as { disable(setting: string): void }).disable('x-powered-by');
  // Nest's default re-raises the signal after closing, which ends the process "killed by
  // SIGTERM"; a clean shutdown should read as exit status 0.
  app.enableShutdownHooks(['SIGTERM', 'SIGINT'], { useProcessExit: true });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      logger.info({ signal }, `${options.name} shutting down`);
      setTimeout(() => {
        logger.error({ timeoutMs: options.shutdownTimeoutMs }, `${options.name} did not shut down in time; exiting`);
        process.exit(1);
      }, options.shutdownTimeoutMs).unref();
    });
  }
  await options.beforeListen?.(app);
  await app.listen(options.port, options.host);
  const address = app.getHttpServer().address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${host}:${address.port}`;
  logger.info({ url }, `${options.name} listening on ${url}`);
  return { app, url, port: address.port };
}

/**
 * For `main.ts`: runs `main`; if it fails (a port in use, a module that cannot be built), prints
 * `<name>: failed to start: <reason>` on stderr and exits with status 1.
 */
export function runMain(name: string, main: () => Promise<unknown>): void {
  main().catch((error: unknown) => {
    process.stderr.write(`${name}: failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
