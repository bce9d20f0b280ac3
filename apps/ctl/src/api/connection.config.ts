import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, env, loadConfig, parseUrl } from '@llmgw/config';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { UsageError, type CliIo } from '../cli-io';

/** Where `llmgw` talks to, and with which token. URLs have no trailing slash. */
export interface Connection {
  readonly controllerUrl: string;
  readonly catalogUrl: string;
  /** Sent as `Authorization: Bearer`; absent = none (a controller without a token answers loopback). */
  readonly token?: string;
}

/** The connection flags every command that talks to a server accepts (node:util parseArgs options). */
export const CONNECTION_OPTIONS = {
  controller: { type: 'string' },
  catalog: { type: 'string' },
  token: { type: 'string' },
  config: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

/** The flag values {@link resolveConnection} reads. */
export interface ConnectionFlags {
  controller?: string;
  catalog?: string;
  token?: string;
  config?: string;
}

/** Where each server is when nothing says otherwise: this machine, the apps' default ports. */
export const DEFAULT_CONTROLLER_URL = 'http://127.0.0.1:8081';
export const DEFAULT_CATALOG_URL = 'http://127.0.0.1:8083';

const HTTP = ['http:', 'https:'] as const;

/** The environment `llmgw` reads (only through @llmgw/config). */
const ctlEnvSchema = z.object({
  LLMGW_CONTROLLER_URL: env.url(HTTP, { optional: true }),
  LLMGW_CATALOG_URL: env.url(HTTP, { optional: true }),
  LLMGW_ADMIN_TOKEN: env.string({ optional: true }),
  /** Base of the default config file, `$XDG_CONFIG_HOME/llmgw/config.yaml`. */
  XDG_CONFIG_HOME: env.path({ optional: true }),
  HOME: env.path({ optional: true }),
  /** Any value turns colour off (no-color.org). */
  NO_COLOR: env.string({ optional: true }),
});

/** The settings read from the environment. */
export type CtlEnv = z.output<typeof ctlEnvSchema>;

/** Reads `llmgw`'s variables from `io.env` (default: the process's); a malformed one is a usage error naming it. */
export function readCtlEnv(io: CliIo): CtlEnv {
  try {
    // Undefined lets loadConfig read the process environment itself: only @llmgw/config reads it.
    return loadConfig(ctlEnvSchema, io.env) as CtlEnv;
  } catch (error) {
    if (error instanceof ConfigError) throw new UsageError(error.message);
    throw error;
  }
}

/** Keys a config file may hold. */
const FILE_KEYS = ['controller', 'catalog', 'token'] as const;

/** The default config file: `$XDG_CONFIG_HOME/llmgw/config.yaml`, else `~/.config/llmgw/config.yaml`. */
export function defaultConfigFile(e: CtlEnv): string {
  return join(e.XDG_CONFIG_HOME ?? join(e.HOME ?? homedir(), '.config'), 'llmgw', 'config.yaml');
}

/**
 * Resolves where to connect: each setting from the flag, else the environment
 * (`LLMGW_CONTROLLER_URL`, `LLMGW_CATALOG_URL`, `LLMGW_ADMIN_TOKEN`), else the config file
 * (`--config FILE`, which must exist, or the default one, which may not), else the defaults.
 * A malformed URL, an unreadable `--config` or an unknown key in the file is a usage error.
 */
export async function resolveConnection(flags: ConnectionFlags, io: CliIo): Promise<Connection> {
  const e = readCtlEnv(io);
  const file = await readConfigFile(flags.config === undefined ? defaultConfigFile(e) : resolve(io.cwd, flags.config), flags.config !== undefined);
  const controller = flagUrl('--controller', flags.controller) ?? e.LLMGW_CONTROLLER_URL ?? file.controller ?? DEFAULT_CONTROLLER_URL;
  const catalog = flagUrl('--catalog', flags.catalog) ?? e.LLMGW_CATALOG_URL ?? file.catalog ?? DEFAULT_CATALOG_URL;
  if (flags.token === '') throw new UsageError('--token must not be empty');
  const token = flags.token ?? e.LLMGW_ADMIN_TOKEN ?? file.token;
  return { controllerUrl: trimSlash(controller), catalogUrl: trimSlash(catalog), ...(token !== undefined ? { token } : {}) };
}

function flagUrl(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const parsed = parseUrl(HTTP)(value);
  if (!parsed.ok) throw new UsageError(`${flag} ${JSON.stringify(value)}: ${parsed.reason}`);
  return value;
}

async function readConfigFile(file: string, required: boolean): Promise<Partial<Record<(typeof FILE_KEYS)[number], string>>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (!required && (error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new UsageError(`cannot read config file ${file}: ${(error as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { uniqueKeys: true });
  } catch (error) {
    throw new UsageError(`config file ${file}: ${(error as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new UsageError(`config file ${file}: expected a mapping with ${FILE_KEYS.join(', ')}`);
  const problems: string[] = [];
  const out: Partial<Record<(typeof FILE_KEYS)[number], string>> = {};
  for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
    if (!(FILE_KEYS as readonly string[]).includes(key)) {
      problems.push(`${key}: unknown key (expected ${FILE_KEYS.join(', ')})`);
      continue;
    }
    if (typeof value !== 'string' || value === '') {
      problems.push(`${key}: expected non-empty text`);
      continue;
    }
    if (key !== 'token') {
      const parsed = parseUrl(HTTP)(value);
      if (!parsed.ok) {
        problems.push(`${key}: ${parsed.reason}`);
        continue;
      }
    }
    out[key as (typeof FILE_KEYS)[number]] = value;
  }
  if (problems.length > 0) throw new UsageError(`config file ${file}:\n  ${problems.join('\n  ')}`);
  return out;
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
