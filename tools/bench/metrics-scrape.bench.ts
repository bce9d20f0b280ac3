// Metrics scrape benchmark: what one /metrics scrape of the controller's cluster metrics costs at
// fleet scale (default 2,000 nodes x 8 GPUs), in time and in bytes allocated, against a baseline
// in the same run: the four per-GPU families (memory total and used, utilisation, ECC errors) as
// prom-client Gauges that set every series at scrape time, as the controller had them before
// they became text families. The controller's side is all its cluster families (a superset of
// the baseline's four). Bytes come from V8's sampling heap profiler counting every allocation,
// collected or not (1 KiB sampling interval).
// Usage: npm run bench:metrics-scrape [-- --nodes 2000 --scrapes 5 --no-write]
import * as inspector from 'node:inspector';
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import type { NodeEntry } from '@llmgw/control';
import { registerClusterMetrics } from '../../apps/controller/src/metrics/cluster.collector';
import { createMetricsRegistry, type MetricsRegistry } from '@llmgw/observability';
import { Gauge } from 'prom-client';
import { machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const { values: args } = parseArgs({
  options: {
    nodes: { type: 'string', default: '2000' },
    scrapes: { type: 'string', default: '5' },
    'no-write': { type: 'boolean', default: false },
  },
});
const NODES = Number(args.nodes);
const SCRAPES = Number(args.scrapes);
for (const [name, v, max] of [['nodes', NODES, 20_000], ['scrapes', SCRAPES, 50]] as const) {
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`--${name}: expected a whole number 1..${max}, got ${v}`);
}

/** `NODES` healthy nodes of 8 H100s each, every GPU with every live value reported. */
function fleet(): Map<string, NodeEntry> {
  const nodes = new Map<string, NodeEntry>();
  for (let i = 0; i < NODES; i++) {
    const id = `node-${String(i).padStart(5, '0')}`;
    const gpus = Array.from({ length: 8 }, (_, index) => ({
      index,
      uuid: `GPU-${id}-${index}`,
      name: 'NVIDIA H100 80GB HBM3',
      gpuClass: 'H100-80GB',
      memoryTotalBytes: 80e9,
      memoryUsedBytes: 1e9 + index,
      utilizationPct: index,
      temperatureC: 35,
      eccErrors: 0,
      healthy: true,
    }));
    const cache = { dir: '/var/cache/llmgw', totalBytes: 4e12, freeBytes: 3.5e12, entries: [] };
    nodes.set(id, {
      info: { id, address: '10.0.0.1', labels: {}, fabric: `fabric-${Math.floor(i / 100)}`, gpus, cpuCores: 128, memoryBytes: 2e12, cache, state: 'healthy', cordoned: false },
      cacheFreeBytes: cache.freeBytes,
      connected: true,
      draining: false,
      reported: new Map(),
    });
  }
  return nodes;
}

/** The baseline: the four per-GPU families as prom-client Gauges whose collect sets every series. */
function promClientPerGpu(registry: MetricsRegistry, nodes: ReadonlyMap<string, NodeEntry>): void {
  type Gpu = NodeEntry['info']['gpus'][number];
  const families: [string, (g: Gpu) => number | undefined][] = [
    ['llmgw_cluster_gpu_memory_total_bytes', (g) => g.memoryTotalBytes],
    ['llmgw_cluster_gpu_memory_used_bytes', (g) => g.memoryUsedBytes],
    ['llmgw_cluster_gpu_utilization_ratio', (g) => (g.utilizationPct === undefined ? undefined : g.utilizationPct / 100)],
    ['llmgw_cluster_gpu_ecc_errors', (g) => g.eccErrors],
  ];
  for (const [name, value] of families) {
    new Gauge({
      name,
      help: name,
      labelNames: ['node', 'gpu', 'gpu_class'],
      registers: [registry],
      collect() {
        this.reset();
        for (const n of nodes.values()) {
          for (const g of n.info.gpus) {
            const v = value(g);
            if (v !== undefined) this.set({ node: n.info.id, gpu: String(g.index), gpu_class: g.gpuClass }, v);
          }
        }
      },
    });
  }
}

const session = new inspector.Session();
session.connect();
const post = <T>(method: string, params: object = {}): Promise<T> =>
  new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result as T))));

interface ProfileNode {
  selfSize: number;
  children: ProfileNode[];
}

/** ms per scrape and MB allocated per scrape (sampled), `SCRAPES` of each, after one warm-up scrape. */
async function measure(registry: MetricsRegistry): Promise<{ ms: number[]; mb: number[]; textMb: number }> {
  const textMb = (await registry.metrics()).length / 1e6;
  const ms: number[] = [];
  for (let i = 0; i < SCRAPES; i++) {
    const t0 = performance.now();
    await registry.metrics();
    ms.push(performance.now() - t0);
  }
  const mb: number[] = [];
  await post('HeapProfiler.enable');
  for (let i = 0; i < SCRAPES; i++) {
    await post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    await registry.metrics();
    const { profile } = await post<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
    let total = 0;
    const walk = (n: ProfileNode): void => {
      total += n.selfSize;
      n.children.forEach(walk);
    };
    walk(profile.head);
    mb.push(total / 1e6);
  }
  return { ms, mb, textMb };
}

async function main(): Promise<void> {
  const nodes = fleet();
  const baseline = createMetricsRegistry({ processMetrics: false });
  promClientPerGpu(baseline, nodes);
  const controller = createMetricsRegistry({ processMetrics: false });
  registerClusterMetrics(controller, {
    clock: { now: () => Date.now() },
    nodes: () => new Map(nodes),
    replicas: () => new Map(),
    unplaceable: () => new Map(),
    isLeader: () => true,
    catalogRevision: () => 1,
    rejectedCatalogRevision: () => undefined,
    snapshotRevision: () => 1,
    watchers: () => 0,
    agentStreams: () => 0,
    commandsSent: () => ({}),
  });
  const before = await measure(baseline);
  const after = await measure(controller);
  const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const rows = [
    ['scrape', 'series per GPU family', 'text (MB)', 'ms per scrape (median)', 'MB allocated per scrape (median)'],
    ['per-GPU families as prom-client Gauges (before)', String(NODES * 8), fmt(before.textMb), fmt(percentile(before.ms, 50)), fmt(percentile(before.mb, 50))],
    ['all cluster families, per-GPU as text families (now)', String(NODES * 8), fmt(after.textMb), fmt(percentile(after.ms, 50)), fmt(percentile(after.mb, 50))],
    ['now ÷ before', '', '', `${(percentile(after.ms, 50) / percentile(before.ms, 50)).toFixed(2)}×`, `${(percentile(after.mb, 50) / percentile(before.mb, 50)).toFixed(2)}×`],
  ];
  printTable(rows);
  if (args['no-write']) return;
  const md = [
    `Command: \`npm run bench:metrics-scrape -- --nodes ${NODES} --scrapes ${SCRAPES}\` (= \`node tools/run.cjs tools/bench/metrics-scrape.bench.ts …\`).`,
    '',
    `Machine: ${machineLine(os.cpus(), os.totalmem())}; load average (1 min) ${os.loadavg()[0].toFixed(1)}.`,
    '',
    `One scrape of the controller's cluster metrics with ${NODES} nodes x 8 GPUs in memory (no fleet, no HTTP), in one process: the baseline is the four per-GPU families as prom-client Gauges that set all ${NODES * 8} series of each at scrape time, as the controller had them; now is every cluster family the controller registers, with the per-GPU ones as text families. Bytes allocated are V8's sampling heap profiler's, counting every allocation whether collected or not; ${SCRAPES} scrapes of each after a warm-up one.`,
    '',
    markdownTable(rows),
  ];
  process.stdout.write(`wrote ${writeSection('metrics-scrape', 'Controller metrics scrape', md.join('\n'))}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`metrics-scrape bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
