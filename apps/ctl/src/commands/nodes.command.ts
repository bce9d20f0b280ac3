import { EXIT_OK } from '../cli-io';
import type { NodeView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { formatBytes, formatDuration, renderTable, UNKNOWN } from '../output/text.format';

/** One row per node: health and operator flags, fabric, GPUs held/total per class, cache free, replicas, last heartbeat. */
export function renderNodes(nodes: readonly NodeView[], now: number): string {
  if (nodes.length === 0) return 'no nodes have registered\n';
  const rows = nodes.map((n) => {
    const flags = [n.state, ...(n.cordoned ? ['cordoned'] : []), ...(n.draining ? ['draining'] : []), ...(n.connected ? [] : ['disconnected'])];
    const classes = [...new Set(n.gpus.map((g) => g.gpuClass))].sort();
    const held = n.gpus.filter((g) => g.replicaId !== undefined).length;
    const unhealthy = n.gpus.filter((g) => !g.healthy).length;
    const gpus = n.gpus.length === 0 ? 'CPU' : `${held}/${n.gpus.length} ${classes.join(',')}${unhealthy > 0 ? ` (${unhealthy} unhealthy)` : ''}`;
    const utils = n.gpus.map((g) => g.utilizationPct).filter((u): u is number => u !== undefined);
    const util = utils.length === 0 ? UNKNOWN : `${Math.round(utils.reduce((s, u) => s + u, 0) / utils.length)}%`;
    return [
      n.id,
      flags.join(','),
      n.fabric ?? UNKNOWN,
      gpus,
      util,
      formatBytes(n.cache.freeBytes),
      String(n.replicas.length),
      n.lastSeen === undefined ? UNKNOWN : `${formatDuration((now - n.lastSeen) / 1000)} ago`,
    ];
  });
  return renderTable(['NODE', 'STATE', 'FABRIC', 'GPUS (HELD/TOTAL)', 'GPU UTIL', 'CACHE FREE', 'REPLICAS', 'LAST SEEN'], rows, [6]);
}

/** `llmgw nodes [--json]`. */
export function createNodesCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['nodes'],
      summary: 'every node: health, cordon/drain, fabric, GPUs held, cache free, last heartbeat',
      usage: 'llmgw nodes [--json]',
      async run(ctx) {
        const { nodes } = await ctx.controller.get<{ nodes: NodeView[] }>('/v1/admin/nodes');
        if (ctx.json) printJson(ctx.io, { nodes });
        else ctx.io.out(renderNodes(nodes, ctx.now()));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const nodesCommand = createNodesCommand();
