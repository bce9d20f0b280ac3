import { userInfo } from 'node:os';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { EXIT_FAILURE, UsageError, type CliCommand, type CliIo } from '../cli-io';
import { styleFor, type Style } from '../output/text.format';
import { ApiClient, ApiError, DEFAULT_REQUEST_TIMEOUT_MS } from './api.client';
import { CONNECTION_OPTIONS, readCtlEnv, resolveConnection, type Connection } from './connection.config';

/** What a command that talks to the servers gets: parsed flags, clients, output style and a clock. */
export interface CommandContext {
  readonly io: CliIo;
  readonly json: boolean;
  readonly connection: Connection;
  readonly controller: ApiClient;
  readonly catalog: ApiClient;
  /** Colour only on a terminal without NO_COLOR, and never with --json. */
  readonly style: Style;
  /** Milliseconds since the epoch. */
  now(): number;
  /** Waits `ms` (polling); tests shorten it. */
  sleep(ms: number): Promise<void>;
}

/** Hooks tests use to control time. */
export interface CommandDeps {
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  requestTimeoutMs?: number;
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** A command talking to the controller and/or catalog API. */
export interface ServerCommandSpec {
  path: readonly string[];
  summary: string;
  usage: string;
  /** Flags beyond the connection flags and --json. */
  options?: Options;
  /** Positional arguments: exactly these names, in order (a usage error otherwise). */
  positionals?: readonly string[];
  run(ctx: CommandContext, values: Record<string, string | boolean | undefined>, positionals: string[]): Promise<number>;
}

/**
 * Builds a {@link CliCommand} that parses the connection flags (`--controller`, `--catalog`,
 * `--token`, `--config`) and `--json` with its own, resolves the connection, and runs. An
 * {@link ApiError} ends it with exit 1: on stderr as `llmgw: <message>` and every problem; with
 * --json also on stdout as `{"error": {...}}`.
 */
export function serverCommand(spec: ServerCommandSpec, deps: CommandDeps = {}): CliCommand {
  return {
    path: spec.path,
    summary: spec.summary,
    usage: spec.usage,
    async run(argv, io) {
      const { values, positionals } = parseArgs({
        args: argv,
        options: { ...CONNECTION_OPTIONS, ...spec.options },
        strict: true,
        allowPositionals: (spec.positionals?.length ?? 0) > 0,
      });
      const wanted = spec.positionals ?? [];
      if (positionals.length !== wanted.length) {
        throw new UsageError(positionals.length < wanted.length ? `missing ${wanted.slice(positionals.length).join(' ')}` : `unexpected argument '${positionals[wanted.length]}'`);
      }
      for (const [i, p] of positionals.entries()) if (p === '') throw new UsageError(`${wanted[i]} must not be empty`);
      const v = values as Record<string, string | boolean | undefined>;
      const connection = await resolveConnection({ controller: str(v.controller), catalog: str(v.catalog), token: str(v.token), config: str(v.config) }, io);
      const json = v.json === true;
      const colour = io.isTTY && !json && readCtlEnv(io).NO_COLOR === undefined;
      const timeout = deps.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
      const ctx: CommandContext = {
        io,
        json,
        connection,
        controller: new ApiClient('controller', connection.controllerUrl, connection.token, timeout),
        catalog: new ApiClient('catalog', connection.catalogUrl, connection.token, timeout),
        style: styleFor(colour),
        now: deps.now ?? (() => Date.now()),
        sleep: deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
      };
      try {
        return await spec.run(ctx, v, positionals);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        return reportApiError(ctx, error);
      }
    },
  };
}

/** Prints an API failure (stderr; with --json also stdout) and returns exit 1. */
export function reportApiError(ctx: Pick<CommandContext, 'io' | 'json'>, error: ApiError): number {
  if (ctx.json) {
    ctx.io.out(JSON.stringify({ error: { message: error.message, ...(error.status !== undefined ? { status: error.status } : {}), problems: error.problems } }, null, 2) + '\n');
  }
  ctx.io.err(`llmgw: ${error.message}\n${error.problems.map((p) => `  ${p.path ? `${p.path}: ` : ''}${p.message}\n`).join('')}`);
  return EXIT_FAILURE;
}

/** Prints `value` as indented JSON with a final newline. */
export function printJson(io: CliIo, value: unknown): void {
  io.out(JSON.stringify(value, null, 2) + '\n');
}

function str(value: string | boolean | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** Who `llmgw` says made a catalog change (the `llmgw-author` header): `llmgw (user)`, printable ASCII. */
export function ctlAuthor(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (some containers): keep "unknown".
  }
  return `llmgw (${user})`.replace(/[^\x20-\x7e]/g, '?').slice(0, 128);
}
