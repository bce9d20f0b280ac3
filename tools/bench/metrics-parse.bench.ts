// Speed of the Prometheus text parser on a vLLM-shaped scrape, against a naive regex parser
// measured in the same run. Run: node tools/run.cjs tools/bench/metrics-parse.bench.ts [iterations]
import { parsePrometheusText, readLoad, defaultMapping } from '@llmgw/metrics-mappings';

/** A vLLM v1-shaped /metrics body: 2 engine cores, gauges, counters and histograms (~200+ series). */
function vllmScrape(): string {
  const model = 'meta-llama/Llama-3.1-8B-Instruct';
  let out = '';
  for (const g of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc']) {
    out += `# HELP vllm:${g} A gauge.\n# TYPE vllm:${g} gauge\n`;
    for (const e of [0, 1]) out += `vllm:${g}{engine="${e}",model_name="${model}"} ${(e + 1) * 0.37}\n`;
  }
  for (const c of ['prompt_tokens_total', 'generation_tokens_total', 'num_preemptions_total']) {
    out += `# HELP vllm:${c} A counter.\n# TYPE vllm:${c} counter\n`;
    for (const e of [0, 1]) out += `vllm:${c}{engine="${e}",model_name="${model}"} ${27453 + e}.0\n`;
  }
  const buckets = ['0.001', '0.005', '0.01', '0.02', '0.04', '0.06', '0.08', '0.1', '0.25', '0.5', '0.75', '1.0', '2.5', '5.0', '7.5', '10.0', '20.0', '40.0', '80.0', '160.0', '640.0', '2560.0', '+Inf'];
  for (const h of ['time_to_first_token_seconds', 'inter_token_latency_seconds', 'e2e_request_latency_seconds', 'request_queue_time_seconds']) {
    out += `# HELP vllm:${h} A histogram.\n# TYPE vllm:${h} histogram\n`;
    for (const e of [0, 1]) {
      buckets.forEach((le, i) => (out += `vllm:${h}_bucket{engine="${e}",le="${le}",model_name="${model}"} ${i * 13}.0\n`));
      out += `vllm:${h}_sum{engine="${e}",model_name="${model}"} 1234.5678\n`;
      out += `vllm:${h}_count{engine="${e}",model_name="${model}"} ${22 * 13}.0\n`;
    }
  }
  return out;
}

/** The baseline: split lines, one regex per sample line, one regex per label pair. */
function naiveParse(text: string): Array<{ name: string; labels: Record<string, string>; value: number }> {
  const out: Array<{ name: string; labels: Record<string, string>; value: number }> = [];
  const line = /^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s*(\S+)(?:\s+(-?\d+))?\s*$/;
  const pair = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?/g;
  for (const l of text.split('\n')) {
    if (l.trim() === '' || l.trimStart().startsWith('#')) continue;
    const m = line.exec(l);
    if (m === null) throw new Error(`bad line ${l}`);
    const labels: Record<string, string> = {};
    if (m[2] !== undefined) for (const p of m[2].matchAll(pair)) labels[p[1]] = p[2].replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/**
 * Median microseconds per call of each candidate. Rounds interleave the candidates so that
 * load from other processes on a shared machine falls on all of them alike.
 */
function measure(fns: ReadonlyArray<() => unknown>, iterations: number): number[] {
  for (const fn of fns) for (let i = 0; i < Math.min(500, iterations); i++) fn(); // warm-up
  const rounds = 21;
  const n = Math.max(1, Math.ceil(iterations / rounds));
  const per: number[][] = fns.map(() => []);
  for (let r = 0; r < rounds; r++) {
    fns.forEach((fn, k) => {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) fn();
      per[k].push(Number(process.hrtime.bigint() - t0) / 1000 / n);
    });
  }
  return per.map(median);
}

const iterations = Number(process.argv[2] ?? 20_000);
const text = vllmScrape();
const series = naiveParse(text).length;
if (parsePrometheusText(text).reduce((n, f) => n + f.samples.length, 0) !== series) throw new Error('parsers disagree on the series count');
const mapping = defaultMapping('vllm');

const [base, ours, full] = measure([() => naiveParse(text), () => parsePrometheusText(text), () => readLoad(text, mapping)], iterations);
const row = (name: string, us: number): [string, string, string, string] => [name, us.toFixed(1), Math.round(1e6 / us).toString(), (base / us).toFixed(2)];
const rows = [row('naive regex (baseline)', base), row('parsePrometheusText', ours), row('readLoad(text) (parse + map)', full)];
process.stdout.write(`metrics-parse: ${series} series, ${text.length} bytes, ${iterations} iterations, node ${process.version}\n\n`);
process.stdout.write('| parser | median µs/scrape | scrapes/s | speed vs baseline |\n|---|---:|---:|---:|\n');
for (const r of rows) process.stdout.write(`| ${r.join(' | ')} |\n`);
