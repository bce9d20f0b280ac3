import { stringify } from 'yaml';
import { EXIT_OK } from '../cli-io';
import type { CatalogView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';

/**
 * The stored catalog as a YAML document `llmgw catalog apply -f` takes back: `revision` first (apply
 * sends it as If-Match, so an edit of a stale copy is refused instead of overwriting), then models.
 */
export function renderCatalogYaml(view: CatalogView, source: string): string {
  return `# llmgw catalog from ${source}\n# Edit and apply with: llmgw catalog apply -f FILE (the revision guards against overwriting newer changes)\n${stringify({ revision: view.revision, models: view.models })}`;
}

/** `llmgw catalog get [--json]`: the current catalog (YAML, or `{revision, models}` as JSON). */
export function createCatalogGetCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['catalog', 'get'],
      summary: 'print the stored catalog (YAML that `catalog apply -f` accepts; --json for JSON)',
      usage: 'llmgw catalog get [--json]',
      async run(ctx) {
        const view = await ctx.catalog.get<CatalogView>('/v1/catalog');
        if (ctx.json) printJson(ctx.io, view);
        else ctx.io.out(renderCatalogYaml(view, ctx.connection.catalogUrl));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const catalogGetCommand = createCatalogGetCommand();
