import { formatGb } from '@llmgw/placement';
import { EXIT_FAILURE, EXIT_OK, UsageError } from '../cli-io';
import type { GcCollectView, GcPlanView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { formatBytes, formatTime, plural, renderTable, type Style } from '../output/text.format';

/**
 * What `gc` lists: per node, the cache entries that carry llmgw's cache name and that no model of
 * the catalog wants. A file an operator put in a cache directory has no cache name and is never
 * listed (the controller decides that; each agent checks it again before removing anything).
 */
export function renderGcPlan(plan: GcPlanView): string {
  const count = plan.nodes.reduce((s, n) => s + n.entries.length, 0);
  if (count === 0) return `nothing to collect: every cached weights file is wanted by catalog revision ${plan.catalogRevision}\n`;
  const rows: string[][] = [];
  for (const n of plan.nodes) {
    for (const e of n.entries) rows.push([n.nodeId + (n.connected ? '' : ' (disconnected)'), e.name, formatBytes(e.sizeBytes), formatTime(e.modifiedAt || undefined)]);
  }
  return (
    renderTable(['NODE', 'CACHE ENTRY', 'SIZE', 'MODIFIED'], rows, [2]) +
    `\n${plural(count, 'entry', 'entries')} (${formatGb(plan.totalBytes)}) on ${plural(plan.nodes.length, 'node')} that no model of catalog revision ${plan.catalogRevision} wants.\n` +
    'Run `llmgw gc --collect --all` (or `--node ID`, repeatable) to ask the agents to remove them.\n'
  );
}

/** Totals of a collect: what was asked (sizes from the plan listed just before) and what each agent did. */
export interface CollectSummary {
  askedEntries: number;
  askedBytes: number;
  nodes: number;
  removed: number;
  removedBytes: number;
  refused: number;
  notFound: number;
  failed: number;
  /** Nodes that gave no per-path answer. */
  unanswered: number;
}

export function summariseCollect(plan: GcPlanView, result: GcCollectView): CollectSummary {
  const sizes = new Map(plan.nodes.map((n) => [n.nodeId, new Map(n.entries.map((e) => [e.name, e.sizeBytes]))]));
  const s: CollectSummary = { askedEntries: 0, askedBytes: 0, nodes: result.nodes.length, removed: 0, removedBytes: result.removedBytes, refused: 0, notFound: 0, failed: 0, unanswered: 0 };
  for (const n of result.nodes) {
    s.askedEntries += n.asked.length;
    for (const name of n.asked) s.askedBytes += sizes.get(n.nodeId)?.get(name) ?? 0;
    if (n.results === undefined) s.unanswered++;
    for (const r of n.results ?? []) {
      if (r.outcome === 'removed') s.removed++;
      else if (r.outcome === 'refused') s.refused++;
      else if (r.outcome === 'not_found') s.notFound++;
      else s.failed++;
    }
  }
  return s;
}

/** "asked to remove N entries (X GB) on M nodes", then each node's answer; refusals are shown as refusals, not failures. */
export function renderCollect(plan: GcPlanView, result: GcCollectView, style: Style): string {
  const s = summariseCollect(plan, result);
  if (s.askedEntries === 0) return `nothing to collect: every cached weights file is wanted by catalog revision ${result.catalogRevision}\n`;
  const out = [`asked to remove ${plural(s.askedEntries, 'entry', 'entries')} (${formatGb(s.askedBytes)}) on ${plural(s.nodes, 'node')}`];
  for (const n of result.nodes) {
    if (n.results === undefined) {
      out.push(`  ${n.nodeId}: ${style.red(`no answer: ${n.error ?? 'unknown error'}`)} (${plural(n.asked.length, 'entry', 'entries')} left in place)`);
      continue;
    }
    for (const r of n.results) {
      const why = r.reason ? `: ${r.reason}` : '';
      if (r.outcome === 'removed') out.push(`  ${n.nodeId}: removed ${r.path}`);
      else if (r.outcome === 'refused') out.push(`  ${n.nodeId}: ${style.yellow('refused')} ${r.path}${why}`);
      else if (r.outcome === 'not_found') out.push(`  ${n.nodeId}: already gone ${r.path}`);
      else out.push(`  ${n.nodeId}: ${style.red('failed')} ${r.path}${why}`);
    }
  }
  const parts = [`removed ${plural(s.removed, 'entry', 'entries')} (${formatGb(s.removedBytes)})`];
  if (s.refused > 0) parts.push(`${s.refused} refused by the node`);
  if (s.notFound > 0) parts.push(`${s.notFound} already gone`);
  if (s.failed > 0) parts.push(`${s.failed} failed`);
  if (s.unanswered > 0) parts.push(`${plural(s.unanswered, 'node')} did not answer`);
  out.push(parts.join(', '));
  return out.join('\n') + '\n';
}

/**
 * `llmgw gc [--node ID]... [--json]` lists (default); `llmgw gc --collect (--node ID... | --all)`
 * asks agents to remove unwanted cache entries, on the named nodes or, only when said, on all.
 */
export function createGcCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['gc'],
      summary: 'list cached weights no model wants (per node); --collect asks the agents to remove them',
      usage: 'llmgw gc [--node ID]... [--json] | llmgw gc --collect (--node ID... | --all) [--json]',
      options: { collect: { type: 'boolean', default: false }, node: { type: 'string', multiple: true }, all: { type: 'boolean', default: false } },
      async run(ctx, values) {
        const only = (values as unknown as { node?: string[] }).node;
        if (only !== undefined && values.all === true) throw new UsageError('give --node or --all, not both');
        if (values.all === true && values.collect !== true) throw new UsageError('--all only goes with --collect (listing shows every node by default)');
        if (values.collect === true && only === undefined && values.all !== true) throw new UsageError('--collect needs --node ID (repeatable) or --all to say where to remove files');
        const plan = await ctx.controller.get<GcPlanView>('/v1/admin/gc');
        if (values.collect !== true) {
          const shown = only ? { ...plan, nodes: plan.nodes.filter((n) => only.includes(n.nodeId)) } : plan;
          const view = only ? { ...shown, totalBytes: shown.nodes.reduce((s, n) => s + n.totalBytes, 0) } : shown;
          if (ctx.json) printJson(ctx.io, view);
          else ctx.io.out(renderGcPlan(view));
          return EXIT_OK;
        }
        const { body: result } = await ctx.controller.request<GcCollectView>('POST', '/v1/admin/gc/collect', { body: only ? { nodes: only } : { all: true } });
        const summary = summariseCollect(plan, result);
        if (ctx.json) printJson(ctx.io, { ...result, summary });
        else ctx.io.out(renderCollect(plan, result, ctx.style));
        // A refusal is a node doing its job; only a failure or a node that did not answer is one.
        return summary.failed > 0 || summary.unanswered > 0 ? EXIT_FAILURE : EXIT_OK;
      },
    },
    deps,
  );
}

export const gcCommand = createGcCommand();
