import { EXIT_OK, UsageError } from '../cli-io';
import { printJson, serverCommand, type CommandContext, type CommandDeps } from '../api/server.command';

/** A key as the catalog API shows it (never its secret). */
interface KeyView {
  name: string;
  owner: string;
  models: string[];
  limits: Record<string, number>;
  state: string;
  expiresAt?: string;
  revokedAt?: string;
  revision: number;
}

const LIMIT_FLAGS = {
  rpm: 'requestsPerMinute',
  tpm: 'tokensPerMinute',
  concurrency: 'concurrentRequests',
  'tokens-per-day': 'tokensPerDay',
} as const;

const KEY_OPTIONS = {
  owner: { type: 'string' },
  models: { type: 'string' },
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  concurrency: { type: 'string' },
  'tokens-per-day': { type: 'string' },
  expires: { type: 'string' },
} as const;

const FIELDS_USAGE = '[--owner TEAM] [--models a,b|*] [--rpm N] [--tpm N] [--concurrency N] [--tokens-per-day N] [--expires RFC3339|never]';

/** The body fields the flags name; limits are whole numbers (the server checks their range). */
function fieldsOf(values: Record<string, string | boolean | undefined>, current?: KeyView): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (typeof values.owner === 'string') body.owner = values.owner;
  if (typeof values.models === 'string') body.models = values.models.split(',').map((m) => m.trim()).filter(Boolean);
  const limits: Record<string, number> = { ...(current?.limits ?? {}) };
  let limitsGiven = false;
  for (const [flag, field] of Object.entries(LIMIT_FLAGS)) {
    const raw = values[flag];
    if (typeof raw !== 'string') continue;
    limitsGiven = true;
    if (raw === 'none') delete limits[field];
    else if (/^\d+$/.test(raw)) limits[field] = Number(raw);
    else throw new UsageError(`--${flag} must be a whole number, or none`);
  }
  if (limitsGiven) body.limits = limits;
  if (typeof values.expires === 'string') body.expiresAt = values.expires === 'never' ? null : values.expires;
  return body;
}

function describe(k: KeyView): string {
  const limits = Object.entries(k.limits).map(([name, v]) => `${name}=${v}`).join(' ') || 'no limits';
  const when = k.revokedAt ? ` revoked ${k.revokedAt}` : k.expiresAt ? ` expires ${k.expiresAt}` : '';
  return `${k.name}  ${k.state}  owner ${k.owner}  models ${k.models.join(',')}  ${limits}${when}\n`;
}

/** `llmgw keys create NAME --owner TEAM --models a,b [limits]`: prints the secret once. */
export function createKeysCreateCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['keys', 'create'],
      summary: 'create an API key; its secret is printed once',
      usage: `llmgw keys create NAME --owner TEAM --models a,b|* ${FIELDS_USAGE.replace('[--owner TEAM] [--models a,b|*] ', '')} [--json]`,
      positionals: ['NAME'],
      options: KEY_OPTIONS,
      async run(ctx, values, [name]) {
        const body = { name, ...fieldsOf(values) };
        const { body: created } = await ctx.catalog.request<{ key: KeyView; secret: string }>('POST', '/v1/keys', { body });
        if (ctx.json) printJson(ctx.io, created);
        else ctx.io.out(`${describe(created.key)}secret (shown once, store it now): ${created.secret}\n`);
        return EXIT_OK;
      },
    },
    deps,
  );
}

/** `llmgw keys list`: every key, revoked ones included, never a secret. */
export function createKeysListCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['keys', 'list'],
      summary: 'list API keys (never their secrets)',
      usage: 'llmgw keys list [--json]',
      async run(ctx) {
        const { keys } = await ctx.catalog.get<{ keys: KeyView[] }>('/v1/keys');
        if (ctx.json) printJson(ctx.io, { keys });
        else ctx.io.out(keys.length === 0 ? 'no API keys\n' : keys.map(describe).join(''));
        return EXIT_OK;
      },
    },
    deps,
  );
}

/** `llmgw keys show NAME`. */
export function createKeysShowCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['keys', 'show'],
      summary: 'show one API key',
      usage: 'llmgw keys show NAME [--json]',
      positionals: ['NAME'],
      async run(ctx, _values, [name]) {
        const key = await getKey(ctx, name);
        if (ctx.json) printJson(ctx.io, key);
        else ctx.io.out(describe(key));
        return EXIT_OK;
      },
    },
    deps,
  );
}

/** `llmgw keys update NAME [fields]`: changes only what the flags name (`--rpm none` removes a limit). */
export function createKeysUpdateCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['keys', 'update'],
      summary: 'change an API key (only the fields given; --rpm none removes a limit)',
      usage: `llmgw keys update NAME ${FIELDS_USAGE} [--json]`,
      positionals: ['NAME'],
      options: KEY_OPTIONS,
      async run(ctx, values, [name]) {
        const current = await getKey(ctx, name);
        const body = fieldsOf(values, current);
        if (Object.keys(body).length === 0) throw new UsageError('nothing to change: give at least one field flag');
        const { body: key } = await ctx.catalog.request<KeyView>('PATCH', `/v1/keys/${encodeURIComponent(name)}`, { body, headers: { 'if-match': `"${current.revision}"` } });
        if (ctx.json) printJson(ctx.io, key);
        else ctx.io.out(describe(key));
        return EXIT_OK;
      },
    },
    deps,
  );
}

/** `llmgw keys revoke NAME`: for good; every router refuses it within seconds. */
export function createKeysRevokeCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['keys', 'revoke'],
      summary: 'revoke an API key for good',
      usage: 'llmgw keys revoke NAME [--json]',
      positionals: ['NAME'],
      async run(ctx, _values, [name]) {
        const { body: key } = await ctx.catalog.request<KeyView>('POST', `/v1/keys/${encodeURIComponent(name)}/revoke`);
        if (ctx.json) printJson(ctx.io, key);
        else ctx.io.out(describe(key));
        return EXIT_OK;
      },
    },
    deps,
  );
}

function getKey(ctx: CommandContext, name: string): Promise<KeyView> {
  return ctx.catalog.get<KeyView>(`/v1/keys/${encodeURIComponent(name)}`);
}

export const KEYS_COMMANDS = [createKeysCreateCommand(), createKeysListCommand(), createKeysShowCommand(), createKeysUpdateCommand(), createKeysRevokeCommand()];
