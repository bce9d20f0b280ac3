import { readFileSync } from 'node:fs';
import { parseRouting, parseTimeout } from '@llmgw/catalog';
import { API_ENDPOINTS, ENGINE_KINDS, type Endpoint, type EndpointSnapshot, type EngineKind, type MetricMapping, type ModelRouting, type ModelView } from '@llmgw/domain';
import { mappingProblems } from '@llmgw/metrics-mappings';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { parseTarget } from '../endpoints/endpoint.state';

const metricsSchema = z
  .object({
    running: z.string().optional(),
    waiting: z.string().optional(),
    kvUsage: z.array(z.string()).optional(),
    modelLabel: z.string().optional(),
  })
  .strict();

const fileSchema = z
  .object({
    models: z
      .array(
        z
          .object({
            name: z.string().min(1),
            aliases: z.array(z.string().min(1)).default([]),
            engine: z.enum(ENGINE_KINDS).optional(),
            metrics: metricsSchema.optional(),
            endpoints: z
              .array(z.enum(API_ENDPOINTS))
              .min(1)
              .refine((list) => new Set(list).size === list.length, 'lists an endpoint twice')
              .optional(),
            /** Same syntax and bounds as the catalog's: `500ms`, `30s`, `5m`, `1h`. */
            firstByteTimeout: z.unknown().optional(),
            stallTimeout: z.unknown().optional(),
            /** Same schema and bounds as the catalog's `routing` (libs/catalog parseRouting). */
            routing: z.unknown().optional(),
          })
          .strict(),
      )
      .default([]),
    endpoints: z
      .array(
        z
          .object({
            id: z.string().min(1).optional(),
            model: z.string().min(1),
            url: z.string().min(1),
            engine: z.enum(ENGINE_KINDS).optional(),
            node: z.string().min(1).optional(),
            suspect: z.boolean().default(false),
          })
          .strict(),
      )
      .default([]),
  })
  .strict();

/**
 * Reads the router's static configuration (YAML or JSON) and turns it into a snapshot:
 * `models` (name, aliases, engine, metric mapping override, the API endpoints it serves: absent =
 * all, first-byte and stall deadlines, routing policy) and `endpoints` (id, model, url,
 * engine, node). This is the supported mode without a controller: it must resolve models and
 * aliases on its own. Throws one error listing every problem with its path.
 */
export function loadStaticConfig(path: string): EndpointSnapshot {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`router config file ${path}: cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseStaticConfig(text, path);
}

/** Parses the static configuration document; `source` names it in errors. Revision is 1, and so is its catalog's. */
export function parseStaticConfig(text: string, source: string): EndpointSnapshot {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    throw new Error(`router config file ${source}: not valid YAML/JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  const parsed = fileSchema.safeParse(doc ?? {});
  if (!parsed.success) {
    throw configError(
      source,
      parsed.error.issues.map((i) => `${i.path.map((p, n) => (typeof p === 'number' ? `[${p}]` : `${n > 0 ? '.' : ''}${String(p)}`)).join('') || '(document)'}: ${i.message}`),
    );
  }
  const problems: string[] = [];
  const names = new Map<string, string>();
  const models: ModelView[] = [];
  parsed.data.models.forEach((m, i) => {
    for (const [j, n] of [m.name, ...m.aliases].entries()) {
      const at = j === 0 ? `models[${i}].name` : `models[${i}].aliases[${j - 1}]`;
      const owner = names.get(n);
      if (owner !== undefined) problems.push(`${at}: '${n}' is already used by ${owner}`);
      else names.set(n, at);
    }
    const metrics = m.metrics as MetricMapping | undefined;
    if (metrics) for (const p of mappingProblems(metrics, `models[${i}].metrics`)) problems.push(`${p.path}: ${p.message}`);
    const timeouts: { firstByteTimeoutMs?: number; stallTimeoutMs?: number } = {};
    for (const [field, key] of [
      ['firstByteTimeout', 'firstByteTimeoutMs'],
      ['stallTimeout', 'stallTimeoutMs'],
    ] as const) {
      if (m[field] === undefined) continue;
      const r = parseTimeout(m[field]);
      if (r.ok) timeouts[key] = r.ms;
      else problems.push(`models[${i}].${field}: ${r.message}`);
    }
    let routing: ModelRouting | undefined;
    if (m.routing !== undefined) {
      const r = parseRouting(m.routing, `models[${i}].routing`);
      if (r.ok) routing = r.routing;
      else for (const p of r.problems) problems.push(`${p.path}: ${p.message}`);
    }
    models.push({
      name: m.name,
      aliases: m.aliases,
      engine: m.engine,
      metrics,
      ...(m.endpoints !== undefined ? { endpoints: m.endpoints } : {}),
      ...timeouts,
      ...(routing !== undefined ? { routing } : {}),
    });
  });
  const byName = new Map(models.map((m) => [m.name, m]));
  const ids = new Set<string>();
  const endpoints: Endpoint[] = [];
  parsed.data.endpoints.forEach((e, i) => {
    const at = `endpoints[${i}]`;
    const model = byName.get(e.model);
    if (model === undefined) problems.push(`${at}.model: '${e.model}' is not a model listed under models (by its name, not an alias)`);
    const engine: EngineKind | undefined = e.engine ?? model?.engine;
    if (engine === undefined && model !== undefined) problems.push(`${at}.engine: required (the model names no engine)`);
    try {
      parseTarget(e.url);
    } catch (error) {
      problems.push(`${at}.url: ${error instanceof Error ? error.message : String(error)}`);
    }
    const id = e.id ?? e.url;
    if (ids.has(id)) problems.push(`${at}.id: '${id}' is used twice${e.id === undefined ? ' (ids default to the url)' : ''}`);
    ids.add(id);
    if (model !== undefined && engine !== undefined) {
      endpoints.push({ replicaId: id, model: model.name, url: e.url, engine, nodeId: e.node ?? '', suspect: e.suspect });
    }
  });
  if (problems.length > 0) throw configError(source, problems);
  return { revision: 1, endpoints, catalog: { revision: 1, models } };
}

function configError(source: string, problems: readonly string[]): Error {
  return new Error(`router config file ${source}: ${problems.length} problem(s):\n  ${problems.join('\n  ')}`);
}
