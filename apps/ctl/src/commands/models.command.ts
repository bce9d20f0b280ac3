import { modelEndpoints } from '@llmgw/catalog';
import type { ApiEndpoint } from '@llmgw/domain';
import { EXIT_OK } from '../cli-io';
import type { CatalogModel, CatalogView, ReplicaView, StatusView } from '../api/admin-api.types';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';
import { renderTable, type Style } from '../output/text.format';

/** One model of the catalog with what runs for it. */
export interface ModelRow {
  name: string;
  aliases: string[];
  replicas: { min: number; max: number };
  ready: number;
  /** Replicas on their way (pending, fetching, starting). */
  starting: number;
  failed: number;
  /** `ok` (ready ≥ min), `pending`, `unplaceable` (the controller says it fits nowhere), `idle` (min 0, none running). */
  status: 'ok' | 'pending' | 'unplaceable' | 'idle';
  profiles: string[];
  /** The OpenAI API endpoints it serves (the catalog's `endpoints`, else derived from its profiles). */
  endpoints: readonly ApiEndpoint[];
}

/** `vllm 2×H100` / `llamacpp CPU` / `vllm 2 nodes × 8×H100`. */
export function describeProfile(p: CatalogModel['profiles'][number]): string {
  if (p.gpuClass === undefined) return `${p.engine} CPU`;
  const perNode = `${p.gpusPerNode ?? 1}×${p.gpuClass}`;
  return (p.nodes ?? 1) > 1 ? `${p.engine} ${p.nodes} nodes × ${perNode}` : `${p.engine} ${perNode}`;
}

/** Joins the catalog with the controller's replicas and unplaceable list. */
export function modelRows(catalog: CatalogView, replicas: readonly ReplicaView[], unplaceable: readonly { model: string }[]): ModelRow[] {
  const stuck = new Set(unplaceable.map((u) => u.model));
  return catalog.models.map((m) => {
    const mine = replicas.filter((r) => r.model === m.name);
    const ready = mine.filter((r) => r.state === 'ready').length;
    const starting = mine.filter((r) => r.state === 'pending' || r.state === 'fetching' || r.state === 'starting').length;
    const failed = mine.filter((r) => r.state === 'failed').length;
    const status: ModelRow['status'] = ready >= m.replicas.min ? (m.replicas.min === 0 && mine.length === 0 ? 'idle' : 'ok') : stuck.has(m.name) ? 'unplaceable' : 'pending';
    const endpoints = modelEndpoints({
      ...(m.endpoints !== undefined ? { endpoints: m.endpoints } : {}),
      profiles: m.profiles.map((p) => ({ engine: p.engine, args: p.args ?? [], env: p.env ?? {}, ...(p.endpoints !== undefined ? { endpoints: p.endpoints } : {}) })),
    });
    return { name: m.name, aliases: m.aliases ?? [], replicas: m.replicas, ready, starting, failed, status, profiles: m.profiles.map(describeProfile), endpoints };
  });
}

export function renderModels(rows: readonly ModelRow[], revision: number, style: Style): string {
  if (rows.length === 0) return `catalog revision ${revision}: no models\n`;
  const colour = (s: ModelRow['status']) => (s === 'ok' ? style.green(s) : s === 'unplaceable' ? style.red(s) : s === 'pending' ? style.yellow(s) : s);
  const table = renderTable(
    ['MODEL', 'ALIASES', 'WANTED', 'READY', 'STARTING', 'FAILED', 'STATUS', 'ENDPOINTS', 'PROFILES'],
    rows.map((r) => [
      r.name,
      r.aliases.length ? r.aliases.join(',') : '-',
      r.replicas.min === r.replicas.max ? String(r.replicas.min) : `${r.replicas.min}..${r.replicas.max}`,
      String(r.ready),
      String(r.starting),
      String(r.failed),
      colour(r.status),
      r.endpoints.length ? r.endpoints.join(',') : '-',
      r.profiles.join('; '),
    ]),
    [2, 3, 4, 5],
  );
  return `catalog revision ${revision}\n${table}`;
}

/** `llmgw models [--json]`: the catalog's models with their replicas (catalog API + controller). */
export function createModelsCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['models'],
      summary: 'every catalog model: replicas wanted, ready, on the way, failed; unplaceable ones',
      usage: 'llmgw models [--json]',
      async run(ctx) {
        const [catalog, { replicas }, status] = await Promise.all([
          ctx.catalog.get<CatalogView>('/v1/catalog'),
          ctx.controller.get<{ replicas: ReplicaView[] }>('/v1/admin/replicas'),
          ctx.controller.get<StatusView>('/v1/admin/status'),
        ]);
        const rows = modelRows(catalog, replicas, status.unplaceable);
        if (ctx.json) printJson(ctx.io, { revision: catalog.revision, models: rows });
        else ctx.io.out(renderModels(rows, catalog.revision, ctx.style));
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const modelsCommand = createModelsCommand();
