import { readFile } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { Catalog, CatalogError, diffCatalogs, parseCatalogDocument } from '@llmgw/catalog';
import { parseDuration } from '@llmgw/config';
import type { Problem, ReplicaState } from '@llmgw/domain';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliIo } from '../cli-io';
import { ApiError } from '../api/api.client';
import type { CatalogView, ReplicaView, StatusView, ValidationReport } from '../api/admin-api.types';
import { ctlAuthor, printJson, serverCommand, type CommandContext, type CommandDeps } from '../api/server.command';
import { plural, type Style } from '../output/text.format';

/** How long `--wait` waits unless `--timeout` says otherwise. */
const DEFAULT_WAIT_MS = 10 * 60_000;
/** How often `--wait` asks the controller. */
export const WAIT_POLL_MS = 1_000;

/** Replica states that hold resources: what "still running" means for a model that left the catalog. */
const HOLDING: ReadonlySet<ReplicaState> = new Set(['pending', 'fetching', 'starting', 'ready', 'draining']);

/** One model's progress towards its wanted replicas. */
export interface ModelProgress {
  model: string;
  wanted: number;
  ready: number;
  /** Replicas by state, ready included; states with none are left out. */
  states: Partial<Record<ReplicaState, number>>;
  /** The controller's reason when no profile fits anywhere. */
  unplaceable?: string;
}

/** Where a rollout stands: done once the controller runs the applied revision and every model has its replicas. */
export interface RolloutProgress {
  revision: number;
  /** Revision the controller has loaded; absent = none yet. */
  controllerRevision?: number;
  /** The controller refused this revision (it failed validation there). */
  rejected: boolean;
  models: ModelProgress[];
  /** Models no longer in the catalog whose replicas still hold resources. */
  leftovers: { model: string; replicas: number }[];
  done: boolean;
}

/** Pure: progress of `revision` (with its catalog) from one status and replica listing. */
export function rolloutProgress(catalog: Catalog, revision: number, status: StatusView, replicas: readonly ReplicaView[]): RolloutProgress {
  const controllerRevision = status.controller.catalogRevision;
  const models = catalog.models.map((m): ModelProgress => {
    const states: Partial<Record<ReplicaState, number>> = {};
    for (const r of replicas) if (r.model === m.name) states[r.state] = (states[r.state] ?? 0) + 1;
    const unplaceable = status.unplaceable.find((u) => u.model === m.name);
    return { model: m.name, wanted: m.replicas.min, ready: states.ready ?? 0, states, ...(unplaceable ? { unplaceable: unplaceable.summary } : {}) };
  });
  const leftover = new Map<string, number>();
  for (const r of replicas) if (!catalog.get(r.model) && HOLDING.has(r.state)) leftover.set(r.model, (leftover.get(r.model) ?? 0) + 1);
  const leftovers = [...leftover].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([model, n]) => ({ model, replicas: n }));
  const loaded = controllerRevision !== undefined && controllerRevision >= revision;
  return {
    revision,
    ...(controllerRevision !== undefined ? { controllerRevision } : {}),
    rejected: status.controller.rejectedCatalogRevision === revision,
    models,
    leftovers,
    done: loaded && models.every((m) => m.ready >= m.wanted) && leftovers.length === 0,
  };
}

/** Progress as lines: one per model (`ready 1/2, fetching 1`), leftovers being torn down, unplaceable reasons. */
export function renderProgress(p: RolloutProgress, style: Style): string[] {
  const lines: string[] = [];
  const loaded = p.controllerRevision !== undefined && p.controllerRevision >= p.revision;
  lines.push(loaded ? `controller runs catalog revision ${p.controllerRevision}` : `waiting for the controller to load revision ${p.revision} (it has ${p.controllerRevision ?? 'none'})`);
  for (const m of p.models) {
    const others = Object.entries(m.states)
      .filter(([state]) => state !== 'ready')
      .map(([state, n]) => `${state} ${n}`);
    const mark = m.ready >= m.wanted ? style.green('ok') : m.unplaceable ? style.red('unplaceable') : style.yellow('..');
    lines.push(`  ${mark} ${m.model}: ready ${m.ready}/${m.wanted}${others.length ? `, ${others.join(', ')}` : ''}`);
    if (m.unplaceable && m.ready < m.wanted) for (const l of m.unplaceable.split('\n').slice(1)) lines.push(`    ${l}`);
  }
  for (const l of p.leftovers) lines.push(`  .. ${l.model}: removed from the catalog, ${plural(l.replicas, 'replica')} still being torn down`);
  return lines;
}

/** Reads the file and turns it into a catalog document plus the revision it names (`revision:` written by `catalog get`). */
async function readDocument(io: CliIo, file: string): Promise<{ document: unknown; revision?: number }> {
  let text: string;
  try {
    text = await readFile(resolve(io.cwd, file), 'utf8');
  } catch (error) {
    throw new ApplyFailure(`cannot read ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = parseCatalogDocument(text, extname(file).toLowerCase() === '.json' ? 'json' : 'yaml');
  } catch (error) {
    if (error instanceof CatalogError) throw new ApplyFailure(`${file}: ${error.message.split('\n')[0]}`, error.problems);
    throw error;
  }
  if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) && 'revision' in parsed) {
    const { revision, ...document } = parsed as Record<string, unknown>;
    if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 0) {
      throw new ApplyFailure(`${file}: revision must be a whole number (the catalog revision this file was edited from)`, [{ path: 'revision', message: `got ${JSON.stringify(revision)}` }]);
    }
    return { document, revision };
  }
  return { document: parsed };
}

/** A local failure before or instead of a server answer: printed with its problems, exit 1. */
class ApplyFailure extends Error {
  constructor(
    message: string,
    readonly problems: readonly Problem[] = [],
  ) {
    super(message);
  }
}

function renderReport(report: ValidationReport, file: string): string {
  if (!report.valid) return `${file}: invalid (${plural(report.problems.length, 'problem')})\n${report.problems.map((p) => `  ${p.path ? `${p.path}: ` : ''}${p.message}\n`).join('')}`;
  const out: string[] = [`${file}: valid; dry run, nothing stored`];
  const c = report.changes;
  if (c) {
    const parts = [c.added.length ? `add ${c.added.join(', ')}` : '', c.removed.length ? `remove ${c.removed.join(', ')}` : '', c.changed.length ? `change ${c.changed.join(', ')}` : ''].filter(Boolean);
    out.push(`against revision ${c.currentRevision}: ${parts.length ? parts.join('; ') : 'no change'}`);
  }
  const preview = report.preview;
  if (preview) {
    out.push(`placement preview on ${plural(preview.nodes, 'node')}:`);
    for (const m of preview.models) {
      const where = m.placements.map((p) => `${p.members.map((x) => `${x.nodeId}${x.gpuIndices.length ? `[${x.gpuIndices.join(',')}]` : ''}`).join('+')} (profile ${p.profileIndex}: ${p.profile})`);
      const head = `  ${m.model}: ${m.outcome}, wants ${m.wanted}, has ${m.existing}`;
      if (m.outcome === 'satisfied' && m.wanted === 0) out.push(`${head}${where.length ? `; a first replica would go to ${where[0]}` : m.unplaceable ? '; a first replica would fit nowhere' : ''}`);
      else out.push(`${head}${where.length ? `; new: ${where.join(', ')}` : ''}${m.truncated ? ' (preview stopped early)' : ''}`);
      if (m.unplaceable && m.outcome !== 'satisfied') for (const line of m.unplaceable.summary.split('\n').slice(1)) out.push(`  ${line}`);
    }
  }
  return out.join('\n') + '\n';
}

/** Polls the controller until the rollout is done, rejected or timed out; returns the last progress. */
async function waitForRollout(ctx: CommandContext, catalog: Catalog, revision: number, timeoutMs: number): Promise<{ progress?: RolloutProgress; timedOut: boolean }> {
  const deadline = ctx.now() + timeoutMs;
  let last: RolloutProgress | undefined;
  let lastText = '';
  let drawn = 0;
  let unreachable = false;
  for (;;) {
    try {
      const [status, { replicas }] = await Promise.all([ctx.controller.get<StatusView>('/v1/admin/status'), ctx.controller.get<{ replicas: ReplicaView[] }>('/v1/admin/replicas')]);
      last = rolloutProgress(catalog, revision, status, replicas);
      unreachable = false;
    } catch (error) {
      // A controller restarting mid-rollout is not a failed rollout; anything it refuses is.
      if (!(error instanceof ApiError) || (error.status !== undefined && error.status < 500)) throw error;
      if (!unreachable && !ctx.json) ctx.io.err(`llmgw: ${error.message}; still waiting\n`);
      unreachable = true;
    }
    if (last && !ctx.json) {
      const lines = renderProgress(last, ctx.style);
      const text = lines.join('\n');
      if (ctx.io.isTTY) {
        // Redraw the block in place: cursor up over the previous one, clear to the end.
        ctx.io.out(`${drawn > 0 ? `\x1b[${drawn}A\x1b[J` : ''}${text}\n`);
        drawn = lines.length;
      } else if (text !== lastText) {
        ctx.io.out(`${text}\n`);
      }
      lastText = text;
    }
    if (last?.done || last?.rejected) return { progress: last, timedOut: false };
    if (ctx.now() >= deadline) return { progress: last, timedOut: true };
    await ctx.sleep(Math.min(WAIT_POLL_MS, Math.max(0, deadline - ctx.now())));
  }
}

/** `llmgw catalog apply -f FILE [--dry-run] [--wait [--timeout DUR]] [--json]`. */
export function createCatalogApplyCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['catalog', 'apply'],
      summary: 'replace the catalog with a file (validated first); --dry-run previews placement; --wait follows the rollout',
      usage: 'llmgw catalog apply -f FILE [--dry-run] [--wait] [--timeout D]',
      options: { file: { type: 'string', short: 'f' }, 'dry-run': { type: 'boolean', default: false }, wait: { type: 'boolean', default: false }, timeout: { type: 'string' } },
      async run(ctx, values) {
        const file = typeof values.file === 'string' ? values.file : '';
        if (file === '') throw new UsageError('missing -f FILE');
        const dryRun = values['dry-run'] === true;
        const wait = values.wait === true;
        if (dryRun && wait) throw new UsageError('--dry-run stores nothing, so there is nothing to --wait for');
        let timeoutMs = DEFAULT_WAIT_MS;
        if (values.timeout !== undefined) {
          if (!wait) throw new UsageError('--timeout applies to --wait');
          const parsed = parseDuration(String(values.timeout));
          if (!parsed.ok || parsed.value <= 0) throw new UsageError(`--timeout ${JSON.stringify(values.timeout)}: expected a duration such as 90s, 10m`);
          timeoutMs = parsed.value;
        }

        let candidate: Catalog;
        let fileRevision: number | undefined;
        let document: unknown;
        try {
          ({ document, revision: fileRevision } = await readDocument(ctx.io, file));
          try {
            candidate = Catalog.create(document);
          } catch (error) {
            if (error instanceof CatalogError) throw new ApplyFailure(`${file}: ${error.message.split('\n')[0]}`, error.problems);
            throw error;
          }
        } catch (error) {
          if (!(error instanceof ApplyFailure)) throw error;
          if (ctx.json) printJson(ctx.io, { applied: false, problems: error.problems, message: error.message });
          ctx.io.err(`llmgw: ${error.message}\n${error.problems.map((p) => `  ${p.path ? `${p.path}: ` : ''}${p.message}\n`).join('')}`);
          return EXIT_FAILURE;
        }

        if (dryRun) {
          const { body: report } = await ctx.catalog.request<ValidationReport>('POST', '/v1/catalog/validate', { body: document });
          if (ctx.json) printJson(ctx.io, report);
          else ctx.io.out(renderReport(report, file));
          return report.valid ? EXIT_OK : EXIT_FAILURE;
        }

        // The write is conditional on the revision the file was edited from, or else the one the
        // diff below was computed against: a change made meanwhile is refused, never overwritten.
        const current = await ctx.catalog.get<CatalogView>('/v1/catalog');
        const base = fileRevision ?? current.revision;
        let before: Catalog | undefined;
        try {
          before = Catalog.create({ models: current.models });
        } catch {
          before = undefined;
        }
        const diff = diffCatalogs(before, candidate);
        const unchanged = base === current.revision && before !== undefined && diff.added.length + diff.removed.length + diff.changed.length === 0;
        let revision = current.revision;
        if (!unchanged) {
          try {
            const { body } = await ctx.catalog.request<CatalogView>('PUT', '/v1/catalog', { body: document, headers: { 'if-match': `"${base}"`, 'llmgw-author': ctlAuthor() } });
            revision = body.revision;
          } catch (error) {
            if (error instanceof ApiError && error.status === 412) {
              throw new ApiError(`the catalog changed since revision ${base} (now ${current.revision === base ? 'newer' : current.revision}): get it again, reapply your edit, and apply`, 412);
            }
            throw error;
          }
        }
        const summary = [diff.added.length ? `added ${diff.added.join(', ')}` : '', diff.removed.length ? `removed ${diff.removed.join(', ')}` : '', diff.changed.length ? `changed ${diff.changed.join(', ')}` : ''].filter(Boolean).join('; ');
        if (!ctx.json) ctx.io.out(unchanged ? `unchanged: catalog revision ${revision} already holds this\n` : `applied catalog revision ${revision}${summary ? `: ${summary}` : ''}\n`);
        if (!wait) {
          if (ctx.json) printJson(ctx.io, { applied: !unchanged, revision, changes: diff });
          return EXIT_OK;
        }

        const { progress, timedOut } = await waitForRollout(ctx, candidate, revision, timeoutMs);
        const ok = progress?.done === true;
        if (ctx.json) printJson(ctx.io, { applied: !unchanged, revision, changes: diff, ready: ok, ...(progress ? { progress } : {}) });
        else if (ok) ctx.io.out(`ready: every model of revision ${revision} has its replicas\n`);
        else if (progress?.rejected) ctx.io.err(`llmgw: the controller rejected catalog revision ${revision}; see its log\n`);
        else if (timedOut) {
          const missing = progress?.models.filter((m) => m.ready < m.wanted).map((m) => `${m.model} ${m.ready}/${m.wanted}`) ?? [];
          ctx.io.err(`llmgw: not ready after ${Math.round(timeoutMs / 1000)}s${missing.length ? `: ${missing.join(', ')}` : ''}${progress && progress.leftovers.length ? `; still tearing down ${progress.leftovers.map((l) => l.model).join(', ')}` : ''}\n`);
        }
        return ok ? EXIT_OK : EXIT_FAILURE;
      },
    },
    deps,
  );
}

export const catalogApplyCommand = createCatalogApplyCommand();
