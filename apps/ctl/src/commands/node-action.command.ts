import type { CliCommand } from '../cli-io';
import { EXIT_OK } from '../cli-io';
import type { NodeView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { plural } from '../output/text.format';

/** The operator actions on a node the controller offers. */
export type NodeAction = 'cordon' | 'uncordon' | 'drain';

const SUMMARIES: Record<NodeAction, string> = {
  cordon: 'stop placing new replicas on NODE (running ones stay)',
  uncordon: 'let NODE take new replicas again (ends a drain too)',
  drain: 'cordon NODE and move its replicas elsewhere',
};

/** What the controller reports after an action, in one line. */
export function describeNodeAfter(action: NodeAction, n: NodeView): string {
  const flags = [n.state, ...(n.cordoned ? ['cordoned'] : ['schedulable']), ...(n.draining ? ['draining'] : [])].join(', ');
  const held = n.replicas.length;
  const tail = action === 'drain' ? `; ${plural(held, 'replica')} still there, being moved` : held > 0 ? `; ${plural(held, 'replica')} on it` : '';
  return `node ${n.id}: ${flags}${tail}\n`;
}

/** `llmgw cordon|uncordon|drain NODE [--json]`: POST /v1/admin/nodes/{id}/{action}. */
export function createNodeActionCommand(action: NodeAction, deps: CommandDeps = {}): CliCommand {
  return serverCommand(
    {
      path: [action],
      summary: SUMMARIES[action],
      usage: `llmgw ${action} NODE [--json]`,
      positionals: ['NODE'],
      async run(ctx, _values, [nodeId]) {
        const { body } = await ctx.controller.request<{ node: NodeView }>('POST', `/v1/admin/nodes/${encodeURIComponent(nodeId)}/${action}`);
        if (ctx.json) printJson(ctx.io, body);
        else ctx.io.out(describeNodeAfter(action, body.node));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const cordonCommand = createNodeActionCommand('cordon');
export const uncordonCommand = createNodeActionCommand('uncordon');
export const drainCommand = createNodeActionCommand('drain');
