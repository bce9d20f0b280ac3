import { readFile } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Catalog, CatalogError, loadCatalog } from '@llmgw/catalog';
import type { Model, Problem, Profile } from '@llmgw/domain';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliCommand, type CliIo } from '../cli-io';

/** What a valid catalog holds, as `--json` prints it. */
export interface CatalogSummary {
  models: number;
  profiles: number;
  /** Replicas wanted across all models. */
  replicas: { min: number; max: number };
  byModel: { name: string; aliases: string[]; replicas: { min: number; max: number }; sizeBytes: number; profiles: string[] }[];
}

/**
 * `llmgw catalog validate -f FILE [--json]`: offline check of a catalog document (YAML, or JSON
 * for a `.json` file). Exit 0 with a summary, or exit 1 with every problem and its path (stderr;
 * with `--json`, `{valid:false, problems}` on stdout). Missing `-f` is a usage error (exit 2).
 */
export const catalogValidateCommand: CliCommand = {
  path: ['catalog', 'validate'],
  summary: 'check a catalog file offline: every problem with its path',
  usage: 'llmgw catalog validate -f FILE [--json]',
  async run(argv: string[], io: CliIo): Promise<number> {
    const { values } = parseArgs({
      args: argv,
      options: { file: { type: 'string', short: 'f' }, json: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: false,
    });
    const file = values.file;
    if (file === undefined || file === '') throw new UsageError('missing -f FILE');
    const json = values.json === true;

    let text: string;
    try {
      text = await readFile(resolve(io.cwd, file), 'utf8');
    } catch (e) {
      return fail(io, json, file, 'cannot read file', [{ path: '', message: `cannot read ${file}: ${(e as Error).message}` }]);
    }
    let catalog: Catalog;
    try {
      catalog = loadCatalog(text, extname(file).toLowerCase() === '.json' ? 'json' : 'yaml');
    } catch (e) {
      if (e instanceof CatalogError) return fail(io, json, file, e.message.split('\n')[0], e.problems);
      throw e;
    }
    const summary = summarise(catalog);
    if (json) io.out(JSON.stringify({ valid: true, summary }, null, 2) + '\n');
    else io.out(renderSummary(file, summary));
    return EXIT_OK;
  },
};

function fail(io: CliIo, json: boolean, file: string, headline: string, problems: readonly Problem[]): number {
  if (json) io.out(JSON.stringify({ valid: false, problems }, null, 2) + '\n');
  else io.err(`${file}: ${headline}\n${problems.map((p) => `  ${p.path ? `${p.path}: ` : ''}${p.message}\n`).join('')}`);
  return EXIT_FAILURE;
}

export function summarise(catalog: Catalog): CatalogSummary {
  let profiles = 0;
  let min = 0;
  let max = 0;
  for (const m of catalog.models) {
    profiles += m.profiles.length;
    min += m.replicas.min;
    max += m.replicas.max;
  }
  return {
    models: catalog.models.length,
    profiles,
    replicas: { min, max },
    byModel: catalog.models.map((m: Model) => ({
      name: m.name,
      aliases: [...m.aliases],
      replicas: { ...m.replicas },
      sizeBytes: m.sizeBytes,
      profiles: m.profiles.map(describeProfile),
    })),
  };
}

/** `vllm H100-80GB×8×2 nodes tp8 pp2`, `llamacpp cpu`. */
function describeProfile(p: Profile): string {
  const parts: string[] = [p.engine, p.gpuClass === undefined ? 'cpu' : `${p.gpuClass}×${p.gpusPerNode}`];
  if (p.nodes > 1) parts.push(`${p.nodes} nodes`);
  if (p.tensorParallel > 1) parts.push(`tp${p.tensorParallel}`);
  if (p.pipelineParallel > 1) parts.push(`pp${p.pipelineParallel}`);
  return parts.join(' ');
}

function renderSummary(file: string, s: CatalogSummary): string {
  const count = (r: { min: number; max: number }) => (r.min === r.max ? String(r.min) : `${r.min}..${r.max}`);
  const lines = [
    `${file}: valid — ${s.models} model${s.models === 1 ? '' : 's'}, ${s.profiles} profile${s.profiles === 1 ? '' : 's'}, ` +
      `${count(s.replicas)} replica${s.replicas.max === 1 ? '' : 's'} wanted`,
  ];
  if (s.byModel.length > 0) {
    const rows = [
      ['MODEL', 'ALIASES', 'REPLICAS', 'SIZE', 'PROFILES'],
      ...s.byModel.map((m) => [m.name, m.aliases.length ? m.aliases.join(',') : '-', count(m.replicas), formatBytes(m.sizeBytes), m.profiles.join('; ')]),
    ];
    const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
    lines.push('');
    for (const r of rows) lines.push(r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]))).join('  '));
  }
  return lines.join('\n') + '\n';
}

/** Decimal units, one decimal: `16.1 GB`. */
function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let v = bytes;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}
