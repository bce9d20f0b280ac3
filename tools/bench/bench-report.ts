// Shared output helpers for tools/bench scripts: percentiles, processes' CPU time, a plain-text table, the machine
// line and the section of docs/benchmarks.md each benchmark owns.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The p-th percentile (0..100) of samples, nearest-rank; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/**
 * A distribution-free confidence interval for the p-th percentile (0..100) of the population the
 * samples come from: the order statistics that hold it with probability ≥ `confidence`, from the
 * exact binomial distribution of how many samples fall below it. A bound the samples cannot give
 * (too few samples beyond the percentile, e.g. p99 of a few hundred) is undefined: the percentile
 * is not pinned down on that side. Treats the samples as independent, which a closed loop's are
 * not quite, so read it as the least uncertainty there is.
 */
export function percentileInterval(samples: readonly number[], p: number, confidence = 0.95): { lower?: number; upper?: number } {
  const n = samples.length;
  if (n === 0 || !(p > 0 && p < 100) || !(confidence > 0 && confidence < 1)) return {};
  const q = p / 100;
  const tail = (1 - confidence) / 2;
  // cdf[k] = P(B ≤ k) for B ~ Binomial(n, q), summed in log space so no term underflows early.
  const cdf: number[] = [];
  let logChoose = 0;
  let sum = 0;
  for (let k = 0; k <= n; k++) {
    if (k > 0) logChoose += Math.log((n - k + 1) / k);
    sum += Math.exp(logChoose + k * Math.log(q) + (n - k) * Math.log1p(-q));
    cdf.push(Math.min(1, sum));
  }
  const sorted = [...samples].sort((a, b) => a - b);
  // lower = x(l), the largest rank l with P(B ≤ l − 1) ≤ tail; upper = x(u), the smallest u with P(B ≤ u − 1) ≥ 1 − tail.
  let l = 0;
  while (l < n && cdf[l] <= tail) l++;
  let u = 1;
  while (u <= n && cdf[u - 1] < 1 - tail) u++;
  return { ...(l >= 1 && { lower: sorted[l - 1] }), ...(u <= n && { upper: sorted[u - 1] }) };
}

export /** CPU time (user + system) of the processes and their children so far, microseconds; undefined off Linux. */
function cpuMicros(pids: readonly number[]): number | undefined {
  if (!fs.existsSync('/proc/self/stat')) return undefined;
  let ticks = 0;
  const visit = (pid: number): void => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
      const children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
      for (const c of children === '' ? [] : children.split(' ')) visit(Number(c));
    } catch {
      // gone: counts nothing
    }
  };
  for (const pid of pids) visit(pid);
  return ticks * 10_000; // USER_HZ is 100 on Linux
}

/** Prints rows (the first is the header) as aligned columns on stdout. */
export function printTable(rows: readonly (readonly string[])[]): void {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const line = (r: readonly string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  process.stdout.write(`${line(rows[0])}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`);
  for (const r of rows.slice(1)) process.stdout.write(`${line(r)}\n`);
  process.stdout.write('\n');
}

/** Rows (the first is the header) as a Markdown table, the first column left-aligned and the others right. */
export function markdownTable(rows: readonly (readonly string[])[]): string {
  return [`| ${rows[0].join(' | ')} |`, `|${rows[0].map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`, ...rows.slice(1).map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

/** One line naming the machine: cores, CPU model, memory, Node version, platform. */
export function machineLine(cpus: readonly os.CpuInfo[], totalMemBytes: number): string {
  const model = cpus[0]?.model.trim() ?? 'unknown CPU';
  return `${cpus.length} cores (${model}), ${(totalMemBytes / 1e9).toFixed(0)} GB RAM, Node ${process.version}, ${os.platform()}-${os.arch()}`;
}

const DOC = path.resolve(__dirname, '..', '..', 'docs', 'benchmarks.md');

/**
 * Replaces the body of benchmark `id`'s section in docs/benchmarks.md (between its start/end
 * markers), appending the section with a `## title` heading when absent and creating the file
 * when missing. Other sections are left byte for byte. Returns the file path.
 */
export function writeSection(id: string, title: string, body: string): string {
  const start = `<!-- bench:${id}:start -->`;
  const end = `<!-- bench:${id}:end -->`;
  let text = fs.existsSync(DOC)
    ? fs.readFileSync(DOC, 'utf8')
    : '# Benchmarks\n\nEach section is written by its script in `tools/bench` (see the command it names); numbers\nare from the run that wrote them. Ratios compare cases measured in the same run.\n';
  const block = `${start}\n${body.trimEnd()}\n${end}`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i >= 0 && j > i) {
    text = text.slice(0, i) + block + text.slice(j + end.length);
  } else {
    text = `${text.trimEnd()}\n\n## ${title}\n\n${block}\n`;
  }
  fs.mkdirSync(path.dirname(DOC), { recursive: true });
  fs.writeFileSync(DOC, text);
  return DOC;
}
