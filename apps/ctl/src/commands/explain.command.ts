import { EXIT_FAILURE, EXIT_OK } from '../cli-io';
import { ApiError } from '../api/api.client';
import type { CatalogModel, EventView, ReplicaView, StatusView, UnplaceableView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { formatDuration, formatTime, plural, renderTable, UNKNOWN, type Style } from '../output/text.format';
import { describeProfile } from './models.command';
import { formatMembers, formatState } from './replicas.command';

/** How many recent events `explain` shows. */
const EVENTS_SHOWN = 15;

/** Everything `explain` knows about one model; `model` absent = not in the catalog. */
export interface Explanation {
  name: string;
  catalogRevision?: number;
  model?: CatalogModel;
  replicas: ReplicaView[];
  unplaceable?: UnplaceableView;
  events: EventView[];
}

/** Where a model's replicas are and why, or why it has none: from the catalog, replicas, unplaceable list and events. */
export function renderExplanation(e: Explanation, style: Style): string {
  const out: string[] = [];
  if (!e.model) {
    out.push(`${style.bold(e.name)} is not in the catalog${e.catalogRevision !== undefined ? ` (revision ${e.catalogRevision})` : ''}`);
    if (e.replicas.length > 0) out.push(`  ${plural(e.replicas.length, 'replica')} of it still exist: the controller tears them down`);
  } else {
    const m = e.model;
    const wanted = m.replicas.min === m.replicas.max ? String(m.replicas.min) : `${m.replicas.min}..${m.replicas.max}`;
    out.push(`${style.bold(m.name)}${m.aliases?.length ? ` (aliases: ${m.aliases.join(', ')})` : ''}: catalog revision ${e.catalogRevision}, wants ${wanted} ${m.replicas.max === 1 ? 'replica' : 'replicas'}`);
    m.profiles.forEach((p, i) => out.push(`  profile ${i}: ${describeProfile(p)}${i === 0 ? ' (preferred)' : ''}`));
    const ready = e.replicas.filter((r) => r.state === 'ready').length;
    const verdict =
      ready >= m.replicas.min
        ? style.green(m.replicas.min === 0 && ready === 0 ? 'scaled to zero: nothing wanted' : `satisfied: ${ready} ready of ${m.replicas.min} wanted`)
        : e.unplaceable
          ? style.red(`unplaceable: ${ready} ready of ${m.replicas.min} wanted, and no profile fits anywhere`)
          : style.yellow(`pending: ${ready} ready of ${m.replicas.min} wanted`);
    out.push(verdict);
  }
  if (e.replicas.length > 0) {
    out.push('', 'REPLICAS');
    out.push(
      renderTable(
        ['REPLICA', 'STATE', 'PROFILE', 'NODES:GPUS', 'RESTARTS', 'IDLE', 'REASON'],
        e.replicas.map((r) => [
          r.id,
          formatState(r.state, style),
          e.model?.profiles[r.profileIndex] ? `${r.profileIndex} (${describeProfile(e.model.profiles[r.profileIndex])})` : String(r.profileIndex),
          formatMembers(r.members),
          String(r.restarts),
          r.idleSeconds === undefined ? UNKNOWN : formatDuration(r.idleSeconds),
          r.reason ?? '',
        ]),
        [4],
      ).trimEnd(),
    );
  }
  if (e.unplaceable) {
    const u = e.unplaceable;
    out.push('', `WHY IT FITS NOWHERE (${plural(u.attempts, 'attempt')} since ${formatTime(u.since)}, next at ${formatTime(u.retryAt)})`);
    for (const line of u.summary.split('\n')) out.push(line.startsWith('  ') ? line : `  ${line}`);
  }
  out.push('', `RECENT EVENTS (newest first)`);
  if (e.events.length === 0) out.push('none recorded');
  else {
    out.push(
      renderTable(
        ['TIME', 'KIND', 'REPLICA', 'NODE', 'REASON'],
        e.events.map((ev) => [formatTime(ev.time), ev.kind, ev.replicaId ?? UNKNOWN, ev.nodeId ?? UNKNOWN, ev.reason ?? '']),
      ).trimEnd(),
    );
  }
  return out.join('\n') + '\n';
}

/** `llmgw explain MODEL [--json]`: exit 1 when the model is neither in the catalog nor running anywhere. */
export function createExplainCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['explain'],
      summary: 'where a model runs and why, or why it is pending or unplaceable',
      usage: 'llmgw explain MODEL [--json]',
      positionals: ['MODEL'],
      async run(ctx, _values, [name]) {
        let model: CatalogModel | undefined;
        let catalogRevision: number | undefined;
        try {
          const found = await ctx.catalog.get<{ revision: number; model: CatalogModel }>(`/v1/catalog/models/${encodeURIComponent(name)}`);
          model = found.model;
          catalogRevision = found.revision;
        } catch (error) {
          if (!(error instanceof ApiError) || error.status !== 404) throw error;
        }
        const canonical = model?.name ?? name;
        const q = encodeURIComponent(canonical);
        const [{ replicas }, status, { events }] = await Promise.all([
          ctx.controller.get<{ replicas: ReplicaView[] }>(`/v1/admin/replicas?model=${q}`),
          ctx.controller.get<StatusView>('/v1/admin/status'),
          ctx.controller.get<{ events: EventView[] }>(`/v1/admin/events?model=${q}&limit=${EVENTS_SHOWN}`),
        ]);
        const explanation: Explanation = {
          name: canonical,
          ...(catalogRevision !== undefined ? { catalogRevision } : {}),
          ...(model ? { model } : {}),
          replicas,
          ...(status.unplaceable.find((u) => u.model === canonical) ? { unplaceable: status.unplaceable.find((u) => u.model === canonical) } : {}),
          events,
        };
        if (ctx.json) printJson(ctx.io, explanation);
        else ctx.io.out(renderExplanation(explanation, ctx.style));
        if (!model && replicas.length === 0 && events.length === 0) {
          ctx.io.err(`llmgw: no model ${JSON.stringify(name)}: not in the catalog, no replicas, no events\n`);
          return EXIT_FAILURE;
        }
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const explainCommand = createExplainCommand();
