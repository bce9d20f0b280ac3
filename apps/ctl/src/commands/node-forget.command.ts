import { EXIT_OK } from '../cli-io';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';

/**
 * `llmgw nodes forget NODE [--json]`: DELETE /v1/admin/nodes/{id}. Removes a lost node and the
 * node secret its id is bound to, so a re-installed machine can join under that id again. The
 * controller refuses (409) a node that is not lost.
 */
export function createNodeForgetCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['nodes', 'forget'],
      summary: 'remove a lost NODE and its node secret, so a re-installed machine can join under its id',
      usage: 'llmgw nodes forget NODE [--json]',
      positionals: ['NODE'],
      async run(ctx, _values, [nodeId]) {
        await ctx.controller.request<undefined>('DELETE', `/v1/admin/nodes/${encodeURIComponent(nodeId)}`);
        if (ctx.json) printJson(ctx.io, { forgotten: nodeId });
        else ctx.io.out(`node ${nodeId} forgotten: its record and node secret are removed; an agent may join under this id again\n`);
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const nodeForgetCommand = createNodeForgetCommand();
