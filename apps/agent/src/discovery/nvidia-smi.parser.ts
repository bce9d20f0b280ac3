import type { Gpu, Problem } from '@llmgw/domain';

/**
 * The fields the agent asks nvidia-smi for, in this order. `utilization.gpu` is last and
 * optional: a driver too old to know it answers with a 7-field row, and the other seven keep
 * their positions, so the node keeps its GPUs and only the utilisation is unknown.
 */
export const NVIDIA_SMI_QUERY_FIELDS = [
  'index',
  'uuid',
  'name',
  'memory.total',
  'memory.used',
  'temperature.gpu',
  'ecc.errors.uncorrected.volatile.total',
  'utilization.gpu',
] as const;
export type NvidiaSmiField = (typeof NVIDIA_SMI_QUERY_FIELDS)[number];

/** argv for nvidia-smi (run without a shell) whose output `parseNvidiaSmiCsv` reads. */
export const NVIDIA_SMI_QUERY_ARGS: readonly string[] = [
  `--query-gpu=${NVIDIA_SMI_QUERY_FIELDS.join(',')}`,
  '--format=csv,noheader,nounits',
];

export interface NvidiaSmiParseOptions {
  /** Maps the reported name to the placement class; default: the name itself. */
  readonly gpuClassOf?: (name: string) => string;
}

/** GPUs from the rows that parsed, and one problem per row (or field) that did not. */
export interface NvidiaSmiParseResult {
  readonly gpus: Gpu[];
  readonly problems: Problem[];
}

const MIB = 1024 * 1024;

/** Units nvidia-smi prints after a value when `nounits` is missing. */
const DEFAULT_UNITS: Partial<Record<NvidiaSmiField, string>> = {
  'memory.total': 'MiB',
  'memory.used': 'MiB',
  'utilization.gpu': '%',
};

/** Error states nvidia-smi prints in place of a value that say the card itself is in trouble. */
const UNHEALTHY_STATES = new Set(['gpu requires reset', 'gpu is lost']);

/** Tokens nvidia-smi prints in place of a value it does not have, with or without brackets. */
const ABSENT_TOKENS = new Set([
  'n/a',
  'not supported',
  'unknown error',
  'not available',
  'not found',
  'insufficient permissions',
  'requested functionality has been deprecated',
  ...UNHEALTHY_STATES,
]);

type Cell =
  | { readonly kind: 'value'; readonly text: string }
  | { readonly kind: 'absent'; readonly text: string; readonly unhealthy: boolean };

function cell(raw: string | undefined): Cell {
  const text = (raw ?? '').trim();
  if (text === '') return { kind: 'absent', text, unhealthy: false };
  const bracketed = /^\[(.*)\]$/.exec(text);
  const token = (bracketed ? bracketed[1] : text).trim().toLowerCase();
  // Any bracketed text is nvidia-smi's way of saying "no value here"; it is never a number.
  if (bracketed || ABSENT_TOKENS.has(token)) {
    return { kind: 'absent', text, unhealthy: UNHEALTHY_STATES.has(token) };
  }
  return { kind: 'value', text };
}

interface Column {
  readonly field: string;
  readonly unit?: string;
}

const HEADER_FIELD = /^([a-z][a-z0-9_.]*)(?: \[([^\]]*)\])?$/i;

/** A header line (`--format=csv` without `noheader`): every field is a field name, maybe with `[unit]`. */
function headerColumns(fields: readonly string[]): Column[] | undefined {
  const columns: Column[] = [];
  for (const f of fields) {
    const m = HEADER_FIELD.exec(f);
    if (!m) return undefined;
    columns.push({ field: m[1], unit: m[2] });
  }
  const known = new Set<string>(NVIDIA_SMI_QUERY_FIELDS);
  return columns.some((c) => known.has(c.field)) ? columns : undefined;
}

function splitRow(line: string): string[] {
  // nvidia-smi separates with ", " and never quotes; a comma inside a name cannot be told apart.
  return line.split(',').map((f) => f.trim());
}

/**
 * Parses nvidia-smi `--query-gpu` CSV into domain GPUs (memory MiB → bytes).
 *
 * - Without a header, rows are positional in `NVIDIA_SMI_QUERY_FIELDS` order, 8 fields or 7
 *   (no `utilization.gpu`). With a header line (`--format=csv[,nounits]`), columns are read by
 *   name in any order and extra columns are ignored; a missing `index` column means row order,
 *   and a missing `memory.total` is `memory.reserved + memory.used + memory.free` when those
 *   columns exist (nvidia-smi's own breakdown of the total).
 * - `[N/A]`, `N/A`, `[Not Supported]`, `[Unknown Error]`, any other `[...]` and empty fields are
 *   absent (undefined), never 0. A trailing unit (`81559 MiB`, `0 %`) is accepted.
 * - Health: a GPU is unhealthy when it reports uncorrected volatile ECC errors (> 0) or any field
 *   reads `[GPU requires reset]` / `[GPU is lost]`. Unknown ECC counts do not make it unhealthy.
 * - A row without a usable index, uuid, name or memory total is skipped with a problem naming the
 *   line; an optional field that is not a number becomes absent with a problem; other rows parse.
 */
export function parseNvidiaSmiCsv(output: string, options: NvidiaSmiParseOptions = {}): NvidiaSmiParseResult {
  const gpuClassOf = options.gpuClassOf ?? ((name: string) => name);
  const gpus: Gpu[] = [];
  const problems: Problem[] = [];
  const lines = output.split(/\r?\n/);

  let columns: Column[] | undefined;
  let headerMode = false;
  let ordinal = 0;
  const seenIndex = new Set<number>();

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const lineNo = i + 1;
    if (line.trim() === '') continue;
    const fields = splitRow(line);

    // 1. The first non-blank line decides the layout: a header names the columns.
    if (columns === undefined) {
      const header = headerColumns(fields);
      if (header) {
        columns = header;
        headerMode = true;
        const missing = ['uuid', 'name'].filter((f) => !header.some((c) => c.field === f));
        const has = (f: string) => header.some((c) => c.field === f);
        if (!has('memory.total') && !(has('memory.used') && has('memory.free'))) missing.push('memory.total');
        if (missing.length > 0) {
          problems.push({ path: `line ${lineNo}`, message: `header lacks column(s) ${missing.join(', ')}: "${line}"` });
          return { gpus, problems };
        }
        continue;
      }
      columns = NVIDIA_SMI_QUERY_FIELDS.map((field) => ({ field, unit: DEFAULT_UNITS[field] }));
    }

    // 2. Map the row's fields to column names, checking the count.
    const row = new Map<string, { raw: string; unit?: string }>();
    if (headerMode) {
      if (fields.length !== columns.length) {
        problems.push({
          path: `line ${lineNo}`,
          message: `expected ${columns.length} fields as in the header, got ${fields.length}; GPU skipped: "${line}"`,
        });
        continue;
      }
    } else if (fields.length !== columns.length && fields.length !== columns.length - 1) {
      problems.push({
        path: `line ${lineNo}`,
        message: `expected ${columns.length - 1} or ${columns.length} fields (${NVIDIA_SMI_QUERY_FIELDS.join(', ')}; the last optional), got ${fields.length}; GPU skipped: "${line}"`,
      });
      continue;
    }
    fields.forEach((raw, k) => row.set(columns![k].field, { raw, unit: columns![k].unit }));
    const rowOrdinal = ordinal++;

    // 3. Read each value: absent tokens are undefined, numbers must be numbers.
    let unhealthyState = false;
    const rowProblems: string[] = [];
    const read = (field: string): Cell | undefined => {
      const entry = row.get(field);
      if (entry === undefined) return undefined;
      const c = cell(entry.raw);
      if (c.kind === 'absent' && c.unhealthy) unhealthyState = true;
      return c;
    };
    for (const field of row.keys()) read(field);

    const num = (field: string, opts: { integer?: boolean; min?: number; max?: number } = {}): number | undefined => {
      const c = read(field);
      if (c === undefined || c.kind === 'absent') return undefined;
      let text = c.text;
      const unit = row.get(field)?.unit;
      if (unit && text.endsWith(` ${unit}`)) text = text.slice(0, -unit.length - 1).trim();
      const pattern = opts.integer ? /^[+-]?\d+$/ : /^[+-]?\d+(?:\.\d+)?$/;
      const value = Number(text);
      if (!pattern.test(text)) {
        rowProblems.push(`${field} "${c.text}" is not ${opts.integer ? 'an integer' : 'a number'}`);
        return undefined;
      }
      if ((opts.min !== undefined && value < opts.min) || (opts.max !== undefined && value > opts.max)) {
        const range = opts.max === undefined ? `>= ${opts.min}` : `in ${opts.min}..${opts.max}`;
        rowProblems.push(`${field} ${c.text} is out of range (must be ${range})`);
        return undefined;
      }
      return value;
    };
    const text = (field: string): string | undefined => {
      const c = read(field);
      return c === undefined || c.kind === 'absent' ? undefined : c.text;
    };

    const index = row.has('index') ? num('index', { integer: true, min: 0 }) : rowOrdinal;
    const uuid = text('uuid');
    const name = text('name');
    const usedMiB = num('memory.used', { min: 0 });
    let totalMiB = num('memory.total', { min: 0 });
    if (!row.has('memory.total')) {
      // Only a header can lack the column; nvidia-smi reports total = reserved + used + free.
      const free = num('memory.free', { min: 0 });
      const reserved = row.has('memory.reserved') ? num('memory.reserved', { min: 0 }) : 0;
      if (usedMiB !== undefined && free !== undefined && reserved !== undefined) totalMiB = reserved + usedMiB + free;
    }
    const temperatureC = num('temperature.gpu');
    const eccErrors = num('ecc.errors.uncorrected.volatile.total', { integer: true, min: 0 });
    const utilizationPct = num('utilization.gpu', { min: 0, max: 100 });

    // 4. Without identity or capacity the GPU cannot be placed: skip it, say why.
    const missing: string[] = [];
    if (index === undefined) missing.push(`index "${row.get('index')?.raw ?? ''}"`);
    if (uuid === undefined) missing.push(`uuid "${row.get('uuid')?.raw ?? ''}"`);
    if (name === undefined) missing.push(`name "${row.get('name')?.raw ?? ''}"`);
    if (totalMiB === undefined) missing.push(`memory.total "${row.get('memory.total')?.raw ?? ''}"`);
    if (missing.length > 0 || index === undefined || uuid === undefined || name === undefined || totalMiB === undefined) {
      problems.push({ path: `line ${lineNo}`, message: `no usable ${missing.join(', ')}; GPU skipped: "${line}"` });
      continue;
    }
    if (seenIndex.has(index)) {
      problems.push({ path: `line ${lineNo}`, message: `duplicate GPU index ${index}; GPU skipped: "${line}"` });
      continue;
    }
    seenIndex.add(index);
    for (const message of rowProblems) problems.push({ path: `line ${lineNo}`, message: `${message}; treated as unknown` });

    gpus.push({
      index,
      uuid,
      name,
      gpuClass: gpuClassOf(name),
      memoryTotalBytes: Math.round(totalMiB * MIB),
      ...(usedMiB !== undefined && { memoryUsedBytes: Math.round(usedMiB * MIB) }),
      ...(utilizationPct !== undefined && { utilizationPct }),
      ...(temperatureC !== undefined && { temperatureC }),
      ...(eccErrors !== undefined && { eccErrors }),
      healthy: !unhealthyState && !(eccErrors !== undefined && eccErrors > 0),
    });
  }
  return { gpus, problems };
}
