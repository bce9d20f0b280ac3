import { EXIT_OK } from '../cli-io';
import { ctlAuthor, printJson, serverCommand, type CommandDeps } from '../api/server.command';

/** `llmgw catalog delete NAME [--json]`: removes one model (by name); the controller tears its replicas down. */
export function createCatalogDeleteCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['catalog', 'delete'],
      summary: 'remove one model from the catalog; its replicas are torn down',
      usage: 'llmgw catalog delete NAME [--json]',
      positionals: ['NAME'],
      async run(ctx, _values, [name]) {
        const { body } = await ctx.catalog.request<{ revision: number; deleted: string }>('DELETE', `/v1/catalog/models/${encodeURIComponent(name)}`, {
          headers: { 'llmgw-author': ctlAuthor() },
        });
        if (ctx.json) printJson(ctx.io, body);
        else ctx.io.out(`deleted ${body.deleted}: catalog revision ${body.revision}\n`);
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const catalogDeleteCommand = createCatalogDeleteCommand();
