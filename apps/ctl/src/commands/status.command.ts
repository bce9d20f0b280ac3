import { REPLICA_STATES } from '@llmgw/domain';
import { EXIT_OK, UsageError } from '../cli-io';
import type { StatusView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { BAR_CHARS, formatDuration, plural, renderTable, usageBar, type Style } from '../output/text.format';

/** Idle replicas listed unless `--top` says otherwise. */
const DEFAULT_TOP = 5;

/**
 * The fleet in one screen, from `GET /v1/admin/status` (the same state the tables show,
 * aggregated): controller and catalog revision, node health, GPU capacity per class with usage
 * bars (used / unhealthy / unavailable / free — an unhealthy card is never free), free whole nodes
 * per fabric, replicas by state, models, unplaceable models with their reasons, and the ready
 * replicas unused for longest. A replica no router has reported has idle `-`: unknown, not idle.
 */
export function renderStatus(s: StatusView, style: Style, top = DEFAULT_TOP): string {
  const out: string[] = [];
  const c = s.controller;
  const role = c.leader ? 'leader' : `standby${c.leaderAddress ? ` (leader at ${c.leaderAddress})` : ''}`;
  const revision = c.catalogRevision === undefined ? 'no catalog loaded' : `catalog revision ${c.catalogRevision}`;
  const rejected = c.rejectedCatalogRevision === undefined ? '' : `; ${style.red(`revision ${c.rejectedCatalogRevision} rejected`)}`;
  out.push(`controller ${c.id}: ${role}, ${c.phase}, ${revision}${rejected}`);

  const n = s.nodes;
  const health = (['healthy', 'unreachable', 'lost'] as const).filter((k) => n[k] > 0).map((k) => `${n[k]} ${k}`);
  out.push(`nodes: ${n.total}${health.length ? ` — ${health.join(', ')}` : ''}${n.cordoned > 0 ? `; ${n.cordoned} cordoned` : ''}`);
  out.push('');

  if (s.capacity.length === 0) {
    out.push('GPU capacity: no GPUs');
  } else {
    out.push(`GPU capacity   ${BAR_CHARS.used} used  ${BAR_CHARS.unhealthy} unhealthy  ${BAR_CHARS.unavailable} unavailable (cordoned, unreachable, lost)  ${BAR_CHARS.free} free`);
    const rows = s.capacity.map((k) => [
      k.gpuClass,
      usageBar(k),
      String(k.used),
      String(k.free),
      String(k.unhealthy),
      String(k.unavailable),
      String(k.total),
      k.total > 0 ? `${Math.round((k.used / k.total) * 100)}%` : '-',
    ]);
    out.push(renderTable(['CLASS', 'USAGE', 'USED', 'FREE', 'UNHEALTHY', 'UNAVAILABLE', 'TOTAL', 'USED%'], rows, [2, 3, 4, 5, 6, 7]).trimEnd());
  }
  out.push(
    `free whole nodes per fabric: ${s.fabrics.length === 0 ? '- (no GPU node has a fabric)' : s.fabrics.map((f) => `${f.fabric} ${f.freeNodes}/${f.nodes}`).join(', ')}`,
  );
  out.push('');

  const states = REPLICA_STATES.filter((k) => (s.replicas.byState[k] ?? 0) > 0).map((k) => `${k} ${s.replicas.byState[k]}`);
  out.push(`replicas: ${s.replicas.total}${states.length ? ` — ${states.join(', ')}` : ''}`);
  const m = s.models;
  out.push(`models: ${m.total} — ${m.satisfied} satisfied${m.unplaceable > 0 ? `, ${style.red(`${m.unplaceable} unplaceable`)}` : ''}`);

  if (s.unplaceable.length > 0) {
    out.push('', 'UNPLACEABLE');
    for (const u of [...s.unplaceable].sort((a, b) => (a.model < b.model ? -1 : 1))) {
      const [first, ...rest] = u.summary.split('\n');
      out.push(`${style.bold(u.model)}: ${first.replace(/^model [^:]+: /, '')} (${plural(u.attempts, 'attempt')})`);
      // The controller's own lines, their indentation kept (profile, then its reasons).
      for (const line of rest) out.push(line);
    }
  }

  out.push('', 'LONGEST UNUSED (ready replicas)');
  const listed = s.idle.replicas.slice(0, top);
  if (listed.length === 0 && s.idle.unknown === 0) {
    out.push('no ready replicas');
  } else {
    if (listed.length > 0) {
      out.push(renderTable(['REPLICA', 'MODEL', 'NODE', 'IDLE'], listed.map((r) => [r.replicaId, r.model, r.nodeId ?? '-', formatDuration(r.idleSeconds)]), [3]).trimEnd());
    }
    const more = s.idle.replicas.length - listed.length;
    if (more > 0) out.push(`… ${plural(more, 'more ready replica')} used more recently`);
    if (s.idle.unknown > 0) out.push(`${plural(s.idle.unknown, 'ready replica')} with no use reported by any router: idle - (unknown, not idle)`);
  }
  return out.join('\n') + '\n';
}

/** `llmgw status [--top N] [--json]`. */
export function createStatusCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['status'],
      summary: 'the fleet at a glance: capacity, fabrics, replicas, unplaceable and unused models',
      usage: 'llmgw status [--top N] [--json]',
      options: { top: { type: 'string' } },
      async run(ctx, values) {
        const top = values.top === undefined ? DEFAULT_TOP : Number(values.top);
        if (!Number.isSafeInteger(top) || top < 0 || !/^\d+$/.test(String(values.top ?? '0'))) throw new UsageError(`--top must be a whole number (got ${JSON.stringify(values.top)})`);
        const status = await ctx.controller.get<StatusView>('/v1/admin/status');
        if (ctx.json) printJson(ctx.io, status);
        else ctx.io.out(renderStatus(status, ctx.style, top));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const statusCommand = createStatusCommand();
