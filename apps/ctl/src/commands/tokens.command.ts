import { EXIT_OK, UsageError } from '../cli-io';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';

interface AdminTokenView {
  name: string;
  scopes: string[];
  createdAt: string;
  revokedAt?: string;
}

const line = (t: AdminTokenView): string => `${t.name}  ${t.scopes.join(',')}  created ${t.createdAt}${t.revokedAt ? `  revoked ${t.revokedAt}` : ''}\n`;

/** `llmgw tokens create NAME --scope read|write`: an admin token; its secret is printed once. Needs the bootstrap token. */
export function createTokensCreateCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['tokens', 'create'],
      summary: 'create an admin token (read: status, usage, reads; write: every change); secret printed once',
      usage: 'llmgw tokens create NAME --scope read|write [--json]',
      positionals: ['NAME'],
      options: { scope: { type: 'string' } },
      async run(ctx, values, [name]) {
        const scope = values.scope;
        if (scope !== 'read' && scope !== 'write') throw new UsageError('--scope must be read or write');
        const { body } = await ctx.catalog.request<{ token: AdminTokenView; secret: string }>('POST', '/v1/admin-tokens', { body: { name, scopes: [scope] } });
        if (ctx.json) printJson(ctx.io, body);
        else ctx.io.out(`${line(body.token)}secret (shown once, store it now): ${body.secret}\n`);
        return EXIT_OK;
      },
    },
    deps,
  );
}

/** `llmgw tokens list`. */
export function createTokensListCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['tokens', 'list'],
      summary: 'list admin tokens (never their secrets)',
      usage: 'llmgw tokens list [--json]',
      async run(ctx) {
        const { tokens } = await ctx.catalog.get<{ tokens: AdminTokenView[] }>('/v1/admin-tokens');
        if (ctx.json) printJson(ctx.io, { tokens });
        else ctx.io.out(tokens.length === 0 ? 'no admin tokens\n' : tokens.map(line).join(''));
        return EXIT_OK;
      },
    },
    deps,
  );
}

/** `llmgw tokens revoke NAME`: for good, on the catalog API and the controller at once (one store). */
export function createTokensRevokeCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['tokens', 'revoke'],
      summary: 'revoke an admin token for good',
      usage: 'llmgw tokens revoke NAME [--json]',
      positionals: ['NAME'],
      async run(ctx, _values, [name]) {
        const { body } = await ctx.catalog.request<AdminTokenView>('POST', `/v1/admin-tokens/${encodeURIComponent(name)}/revoke`);
        if (ctx.json) printJson(ctx.io, body);
        else ctx.io.out(line(body));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const TOKENS_COMMANDS = [createTokensCreateCommand(), createTokensListCommand(), createTokensRevokeCommand()];
