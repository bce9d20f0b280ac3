// Test-only helpers over the real nvidia-smi outputs in libs/testing/fixtures/nvidia-smi.
import { fixturesDir } from '@llmgw/testing';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NVIDIA_SMI_QUERY_FIELDS } from '../nvidia-smi.parser';

export const FIXTURES_DIR = join(fixturesDir(), 'nvidia-smi');
export const H100_CAPTURE = 'capture_h100-80gb-hbm3_590.48.01.txt';
export const P100_CSV = 'tesla-p100_query-gpu_csv_nounits.csv.txt';

/** Every fixture file, by name. */
export const FIXTURE_FILES = [H100_CAPTURE, P100_CSV] as const;

export function readFixture(name: string): string {
  return readFileSync(join(FIXTURES_DIR, name), 'utf8');
}

/** The fixture without its first line (the provenance comment the copy keeps). */
export function withoutProvenance(text: string): string {
  return text.slice(text.indexOf('\n') + 1);
}

/** The body of a `# <title>` section of the H100 capture: lines after its banner up to the next banner. */
export function captureSection(capture: string, title: string): string {
  const lines = capture.split('\n');
  const at = lines.findIndex((l) => l === `# ${title}`);
  if (at < 0) throw new Error(`no section "${title}" in the capture`);
  let start = at + 1;
  while (start < lines.length && lines[start].startsWith('#')) start++;
  let end = start;
  while (end < lines.length && !lines[end].startsWith('####')) end++;
  return lines.slice(start, end).join('\n').trim() + '\n';
}

/** The two `--query-gpu` CSV sections (header + one row each) of the H100 capture. */
export function h100QueryCsv(phase: 'idle' | 'load'): string {
  return captureSection(readFixture(H100_CAPTURE), `${phase} :: query-gpu (csv, what the exporter parses)`);
}

/**
 * Re-emits one captured `--format=csv` row as the agent's own query would print it
 * (`noheader,nounits`, fields in NVIDIA_SMI_QUERY_FIELDS order); `withUtilization: false`
 * gives the 7-field row of a driver that does not know `utilization.gpu`.
 */
export function asAgentQueryRow(csvWithHeader: string, opts: { withUtilization: boolean } = { withUtilization: true }): string {
  const [headerLine, dataLine] = csvWithHeader.trim().split('\n');
  const header = headerLine.split(', ').map((h) => /^(\S+)(?: \[(.*)\])?$/.exec(h)!);
  const values = dataLine.split(', ');
  const fields = opts.withUtilization ? NVIDIA_SMI_QUERY_FIELDS : NVIDIA_SMI_QUERY_FIELDS.slice(0, -1);
  return fields
    .map((field) => {
      const k = header.findIndex((m) => m[1] === field);
      if (k < 0) throw new Error(`capture has no column ${field}`);
      const unit = header[k][2];
      const v = values[k];
      return unit && v.endsWith(` ${unit}`) ? v.slice(0, -unit.length - 1) : v;
    })
    .join(', ');
}
