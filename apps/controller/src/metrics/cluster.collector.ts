import { NODE_STATES, REPLICA_STATES, type Clock } from '@llmgw/domain';
import { capacityByClass, freeNodesByFabric } from '@llmgw/placement';
import { promLabels, type MetricsRegistry } from '@llmgw/observability';
import { Counter, Gauge, Histogram } from 'prom-client';
import { inventoryOf, type NodeEntry, type ReplicaEntry, type UnplaceableState } from '@llmgw/control';

/** The state the cluster metrics are computed from at scrape time. */
export interface ClusterMetricsSource {
  readonly clock: Clock;
  nodes(): ReadonlyMap<string, NodeEntry>;
  replicas(): ReadonlyMap<string, ReplicaEntry>;
  unplaceable(): ReadonlyMap<string, UnplaceableState>;
  isLeader(): boolean;
  catalogRevision(): number | undefined;
  rejectedCatalogRevision(): number | undefined;
  snapshotRevision(): number | undefined;
  watchers(): number;
  agentStreams(): number;
  commandsSent(): Readonly<Record<string, number>>;
}

/** What the reconciler and the publisher report into. */
export interface ControllerMetrics {
  observePass(seconds: number): void;
  observePublish(seconds: number): void;
  /** Router usage times that were in the future and clamped to now. */
  countFutureUsage(count: number): void;
}

const GPU_STATES = ['used', 'free', 'unhealthy', 'unavailable'] as const;

/**
 * A gauge computed at scrape time (its `collect` sets every sample) that drops its samples once
 * read, so between scrapes it holds none: the per-GPU, per-node and per-replica families are tens
 * of thousands of label sets at fleet scale, and each scrape computes them afresh anyway.
 */
class ScrapedGauge<T extends string> extends Gauge<T> {
  override async get(): ReturnType<Gauge<T>['get']> {
    const metric = await super.get();
    this.reset();
    return metric;
  }
}

/**
 * Registers the cluster and controller metric families on `registry`. Every value is computed
 * when Prometheus scrapes, from the state the controller already holds (a collector, not gauges
 * kept current by a ticker). Unknown is absent: a GPU without a reported utilisation, memory use
 * or ECC count has no sample, a node whose disk was not read has no cache sample, a replica no
 * router reported has no idle sample. Unhealthy GPUs are counted as neither used nor free.
 */
export function registerClusterMetrics(registry: MetricsRegistry, source: ClusterMetricsSource): ControllerMetrics {
  const registers = [registry];
  let view: ScrapeView | undefined;
  // One consistent view per scrape: a scrape collects every family within one turn of the event
  // loop (prom-client's families, then the text families, with no I/O between), and the view is
  // dropped when that turn ends, so the entries it copied are not kept until the next scrape.
  const state = (): ScrapeView => {
    if (!view) {
      view = { nodes: source.nodes(), replicas: source.replicas(), gpuLabels: undefined };
      setImmediate(() => (view = undefined));
    }
    return view;
  };

  new Gauge({
    name: 'llmgw_cluster_nodes',
    help: 'Nodes by health state (healthy, unreachable, lost).',
    labelNames: ['state'],
    registers,
    collect() {
      this.reset();
      const counts = new Map<string, number>(NODE_STATES.map((s) => [s, 0]));
      for (const n of state().nodes.values()) counts.set(n.info.state, (counts.get(n.info.state) ?? 0) + 1);
      for (const [s, v] of counts) this.set({ state: s }, v);
    },
  });
  new Gauge({
    name: 'llmgw_cluster_nodes_cordoned',
    help: 'Nodes an operator cordoned (no new replicas).',
    registers,
    collect() {
      let n = 0;
      for (const e of state().nodes.values()) if (e.info.cordoned) n++;
      this.set(n);
    },
  });
  new Gauge({
    name: 'llmgw_cluster_gpus',
    help: 'GPUs by class and state: used (held by a replica), free (placeable), unhealthy (neither used nor free), unavailable (on a node taking no replicas).',
    labelNames: ['gpu_class', 'state'],
    registers,
    collect() {
      this.reset();
      const { nodes, replicas } = state();
      for (const c of capacityByClass(allNodesInventory(nodes, replicas))) {
        for (const s of GPU_STATES) this.set({ gpu_class: c.gpuClass, state: s }, c[s]);
      }
    },
  });
  perGpu(registry, state, 'llmgw_cluster_gpu_memory_total_bytes', 'GPU memory per GPU, bytes.', (g) => g.memoryTotalBytes);
  perGpu(registry, state, 'llmgw_cluster_gpu_memory_used_bytes', 'GPU memory in use per GPU, bytes; absent when the driver did not report it.', (g) => g.memoryUsedBytes);
  perGpu(registry, state, 'llmgw_cluster_gpu_utilization_ratio', 'GPU utilisation per GPU, 0..1; absent when the driver cannot report it.', (g) =>
    g.utilizationPct === undefined ? undefined : g.utilizationPct / 100,
  );
  perGpu(registry, state, 'llmgw_cluster_gpu_ecc_errors', 'Uncorrected ECC errors since the driver loaded, per GPU; absent when ECC is off or unsupported.', (g) => g.eccErrors);
  new Gauge({
    name: 'llmgw_cluster_fabric_nodes',
    help: 'GPU nodes per fabric, any state.',
    labelNames: ['fabric'],
    registers,
    collect() {
      this.reset();
      const { nodes, replicas } = state();
      for (const f of freeNodesByFabric(allNodesInventory(nodes, replicas))) this.set({ fabric: f.fabric }, f.nodes);
    },
  });
  new Gauge({
    name: 'llmgw_cluster_fabric_free_nodes',
    help: 'Whole free nodes per fabric (healthy, uncordoned, every GPU healthy and unallocated): what decides whether a multi-node replica can land.',
    labelNames: ['fabric'],
    registers,
    collect() {
      this.reset();
      const { nodes, replicas } = state();
      for (const f of freeNodesByFabric(allNodesInventory(nodes, replicas))) this.set({ fabric: f.fabric }, f.freeNodes);
    },
  });
  new ScrapedGauge({
    name: 'llmgw_cluster_cache_free_bytes',
    help: 'Free space of each node\'s weights cache filesystem, bytes; absent when the agent could not read it.',
    labelNames: ['node'],
    registers,
    collect() {
      this.reset();
      for (const n of state().nodes.values()) if (n.cacheFreeBytes !== undefined) this.set({ node: n.info.id }, n.cacheFreeBytes);
    },
  });
  new ScrapedGauge({
    name: 'llmgw_cluster_replicas',
    help: 'Replicas by model and state.',
    labelNames: ['model', 'state'],
    registers,
    collect() {
      this.reset();
      const counts = new Map<string, Map<string, number>>();
      for (const e of state().replicas.values()) {
        const byState = counts.get(e.replica.model) ?? new Map<string, number>(REPLICA_STATES.map((s) => [s, 0]));
        byState.set(e.replica.state, (byState.get(e.replica.state) ?? 0) + 1);
        counts.set(e.replica.model, byState);
      }
      for (const [model, byState] of counts) for (const [s, v] of byState) this.set({ model, state: s }, v);
    },
  });
  new Gauge({
    name: 'llmgw_cluster_unplaceable_models',
    help: 'Models that fit on no node right now.',
    registers,
    collect() {
      this.set(source.unplaceable().size);
    },
  });
  new ScrapedGauge({
    name: 'llmgw_cluster_model_unplaceable',
    help: '1 for each model that fits on no node right now (the reason is in the admin API and the events).',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const model of source.unplaceable().keys()) this.set({ model }, 1);
    },
  });
  new ScrapedGauge({
    name: 'llmgw_cluster_replica_idle_seconds',
    help: 'Seconds since a router last used each replica; absent when no router has reported it (unknown, not idle).',
    labelNames: ['model', 'replica'],
    registers,
    collect() {
      this.reset();
      const now = source.clock.now();
      for (const e of state().replicas.values()) {
        const at = e.replica.lastUsedAt;
        if (at !== undefined) this.set({ model: e.replica.model, replica: e.replica.id }, Math.max(0, (now - at) / 1000));
      }
    },
  });
  const passes = new Histogram({
    name: 'llmgw_controller_reconcile_duration_seconds',
    help: 'Time one reconcile pass took: planning, store writes and commands.',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const publishes = new Histogram({
    name: 'llmgw_controller_snapshot_publish_seconds',
    help: 'Time from deciding a new endpoint snapshot is due to having handed it to every watching router stream and sink.',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers,
  });
  new Gauge({
    name: 'llmgw_controller_leader',
    help: '1 while this controller leads (reconciles, places, evicts), else 0.',
    registers,
    collect() {
      this.set(source.isLeader() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'llmgw_controller_catalog_revision',
    help: 'Store revision of the catalog in force; absent before any catalog is loaded.',
    registers,
    collect() {
      this.reset();
      const r = source.catalogRevision();
      if (r !== undefined) this.set(r);
    },
  });
  new Gauge({
    name: 'llmgw_controller_catalog_rejected_revision',
    help: 'Newest stored catalog revision that failed validation and was not applied; absent when none.',
    registers,
    collect() {
      this.reset();
      const r = source.rejectedCatalogRevision();
      if (r !== undefined) this.set(r);
    },
  });
  new Gauge({
    name: 'llmgw_controller_snapshot_revision',
    help: 'Revision of the endpoint snapshot routers were last sent; absent before the first.',
    registers,
    collect() {
      this.reset();
      const r = source.snapshotRevision();
      if (r !== undefined) this.set(r);
    },
  });
  new Gauge({
    name: 'llmgw_controller_watchers',
    help: 'Routers (and in-process sinks) receiving endpoint snapshots.',
    registers,
    collect() {
      this.set(source.watchers());
    },
  });
  new Gauge({
    name: 'llmgw_controller_agent_streams',
    help: 'Open agent streams.',
    registers,
    collect() {
      this.set(source.agentStreams());
    },
  });
  new Counter({
    name: 'llmgw_controller_agent_commands_total',
    help: 'Commands sent to agents, by kind.',
    labelNames: ['kind'],
    registers,
    collect() {
      this.reset();
      for (const [kind, n] of Object.entries(source.commandsSent())) this.inc({ kind }, n);
    },
  });
  const futureUsage = new Counter({
    name: 'llmgw_controller_usage_future_clamped_total',
    help: 'Replica last-used times routers reported later than the controller clock plus 5 s skew, clamped to now.',
    registers,
  });
  return {
    observePass: (seconds) => passes.observe(seconds),
    observePublish: (seconds) => publishes.observe(seconds),
    countFutureUsage: (count) => futureUsage.inc(count),
  };
}

function allNodesInventory(nodes: ReadonlyMap<string, NodeEntry>, replicas: ReadonlyMap<string, ReplicaEntry>) {
  // Metrics count every node, connected or not; placement only uses connected ones.
  const all = new Map<string, NodeEntry>();
  for (const [id, n] of nodes) all.set(id, n.connected ? n : { ...n, connected: true });
  return inventoryOf(all, replicas, undefined);
}

type GpuOf = NodeEntry['info']['gpus'][number];

/** What one scrape reads: taken once, shared by every family collected in that scrape. */
interface ScrapeView {
  readonly nodes: ReadonlyMap<string, NodeEntry>;
  readonly replicas: ReadonlyMap<string, ReplicaEntry>;
  /** Each GPU's `node`, `gpu` and `gpu_class` labels, rendered once for the per-GPU families. */
  gpuLabels: Map<GpuOf, string> | undefined;
}

/**
 * One per-GPU family (a series per GPU: 16,000 at 2,000 nodes of 8), written as text (see
 * TextFamily): the label string of each GPU is rendered once per scrape for all of them.
 */
function perGpu(registry: MetricsRegistry, state: () => ScrapeView, name: string, help: string, value: (g: GpuOf) => number | undefined): void {
  registry.registerTextFamily({
    name,
    help,
    type: 'gauge',
    collect(sample) {
      const view = state();
      view.gpuLabels ??= new Map();
      for (const n of view.nodes.values()) {
        for (const g of n.info.gpus) {
          const v = value(g);
          if (v === undefined) continue;
          let labels = view.gpuLabels.get(g);
          if (labels === undefined) {
            labels = promLabels({ node: n.info.id, gpu: String(g.index), gpu_class: g.gpuClass });
            view.gpuLabels.set(g, labels);
          }
          sample(labels, v);
        }
      }
    },
  });
}
