import { EXIT_OK, UsageError } from '../cli-io';
import type { EventView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { formatTime, renderTable, UNKNOWN } from '../output/text.format';

/** One row per event, newest first as the controller lists them. */
export function renderEvents(events: readonly EventView[]): string {
  if (events.length === 0) return 'no events\n';
  return renderTable(
    ['TIME', 'KIND', 'MODEL', 'REPLICA', 'NODE', 'REASON'],
    events.map((e) => [formatTime(e.time), e.kind, e.model ?? UNKNOWN, e.replicaId ?? UNKNOWN, e.nodeId ?? UNKNOWN, e.reason ?? '']),
  );
}

/** The query string for an events request; `limit` is checked here so a typo is a usage error, not a server 400. */
export function eventsQuery(filter: { model?: string; node?: string; replica?: string; limit?: string }): string {
  const q = new URLSearchParams();
  if (filter.model) q.set('model', filter.model);
  if (filter.node) q.set('node', filter.node);
  if (filter.replica) q.set('replica', filter.replica);
  if (filter.limit !== undefined) {
    if (!/^\d+$/.test(filter.limit) || Number(filter.limit) < 1 || Number(filter.limit) > 1000) throw new UsageError(`--limit must be 1..1000 (got ${JSON.stringify(filter.limit)})`);
    q.set('limit', filter.limit);
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}

/** `llmgw events [--model M] [--node N] [--replica R] [--limit N] [--json]`. */
export function createEventsCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['events'],
      summary: "the controller's decisions, newest first: placed, evicted, refused, lost, unplaceable…",
      usage: 'llmgw events [--model M] [--node N] [--replica R] [--limit N]',
      options: { model: { type: 'string' }, node: { type: 'string' }, replica: { type: 'string' }, limit: { type: 'string' } },
      async run(ctx, values) {
        const s = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
        const { events } = await ctx.controller.get<{ events: EventView[] }>(`/v1/admin/events${eventsQuery({ model: s('model'), node: s('node'), replica: s('replica'), limit: s('limit') })}`);
        if (ctx.json) printJson(ctx.io, { events });
        else ctx.io.out(renderEvents(events));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const eventsCommand = createEventsCommand();
