import { EXIT_OK } from '../cli-io';
import type { ReplicaView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { formatDuration, renderTable, UNKNOWN, type Style } from '../output/text.format';

/** `n1:0,1 n2:0,1` — each member's node and GPU indices (`n1:cpu` without GPUs). */
export function formatMembers(members: ReplicaView['members']): string {
  return members
    .slice()
    .sort((a, b) => a.rank - b.rank)
    .map((m) => `${m.nodeId}:${m.gpuIndices.length ? m.gpuIndices.join(',') : 'cpu'}`)
    .join(' ');
}

/** A replica state, coloured on a terminal: ready green, failed/lost red, on the way yellow. */
export function formatState(state: string, style: Style): string {
  if (state === 'ready') return style.green(state);
  if (state === 'failed' || state === 'lost') return style.red(state);
  if (state === 'stopped') return style.dim(state);
  return style.yellow(state);
}

/** One row per replica. IDLE is `-` for a replica no router has reported: unknown, not idle. */
export function renderReplicas(replicas: readonly ReplicaView[], now: number, style: Style): string {
  if (replicas.length === 0) return 'no replicas\n';
  const rows = replicas.map((r) => [
    r.id,
    r.model,
    formatState(r.state, style),
    formatMembers(r.members),
    String(r.restarts),
    formatDuration((now - r.createdAt) / 1000),
    r.idleSeconds === undefined ? UNKNOWN : formatDuration(r.idleSeconds),
    r.reason ?? '',
  ]);
  return renderTable(['REPLICA', 'MODEL', 'STATE', 'NODES:GPUS', 'RESTARTS', 'AGE', 'IDLE', 'REASON'], rows, [4]);
}

/** `llmgw replicas [--model NAME] [--json]`. */
export function createReplicasCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['replicas'],
      summary: 'every replica: model, state, where, restarts, age, idle time',
      usage: 'llmgw replicas [--model NAME] [--json]',
      options: { model: { type: 'string' } },
      async run(ctx, values) {
        const model = typeof values.model === 'string' && values.model !== '' ? values.model : undefined;
        const { replicas } = await ctx.controller.get<{ replicas: ReplicaView[] }>(`/v1/admin/replicas${model ? `?model=${encodeURIComponent(model)}` : ''}`);
        if (ctx.json) printJson(ctx.io, { replicas });
        else ctx.io.out(renderReplicas(replicas, ctx.now(), ctx.style));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const replicasCommand = createReplicasCommand();
