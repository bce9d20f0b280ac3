// The node-failure scenario shared by tools/e2e/src/failover.e2e.ts (60 s, asserted) and
// tools/bench/failover.bench.ts (longer, written to docs/benchmarks.md): a router, a controller,
// a catalog API and four agents as processes — three with fake 8×H100 inventories running
// sim-engine replicas of a model wanting two, one CPU-only — under sixteen streaming clients;
// an agent holding a replica is killed with kill -9 together with its engines.
import { probeServing } from '../../launcher/src/serving.probe';
import type { ReplicaView } from './admin.types';
import { readProcessTable } from '../../launcher/src/process-tree';
import { AGENT_ENV, cmdline, describeCluster, fakeWeightsDir, TestCluster, type AgentHandle } from './cluster.harness';
import { runStreamingLoad, type StreamRecord } from '@llmgw/testing';

/** Scenario knobs; times in milliseconds. */
export interface FailoverOptions {
  /** How long the clients stream in all. */
  readonly loadMs: number;
  /** When, after the load starts, the agent is killed. */
  readonly killAfterMs: number;
  readonly clients: number;
  /** A cut stream must have ended within this long after the kill. */
  readonly cutDeadlineMs: number;
  readonly log: (line: string) => void;
}

/** What happened, for assertions and the benchmark table. */
export interface FailoverResult {
  readonly records: readonly StreamRecord[];
  readonly killAt: number;
  readonly deadNode: string;
  readonly killedPids: readonly number[];
  /** ms from the kill until the controller reported the node unreachable / lost; undefined if never seen. */
  readonly unreachableAfterMs?: number;
  readonly lostAfterMs?: number;
  /** ms from the kill until the replacement replica was ready / had served a request through the router. */
  readonly replacementReadyAfterMs?: number;
  readonly replacementServingAfterMs?: number;
  readonly replacementNode?: string;
  /** The model's replicas at the end. */
  readonly finalReplicas: readonly ReplicaView[];
  /** Counts, see {@link countRecords}. */
  readonly counts: FailoverCounts;
}

export interface FailoverCounts {
  readonly total: number;
  readonly completed: number;
  readonly failed: number;
  readonly cut: number;
  readonly hung: number;
  readonly startedAfterKill: number;
  readonly failedAfterKill: number;
  /** Cut streams that ended without an SSE error event, or later than the deadline. */
  readonly cutBadly: number;
  readonly inFlightAtKill: number;
}

export const FAILOVER_MODEL = 'failover-demo';
const TOKENS = 32;
const LIVE = new Set(['pending', 'fetching', 'starting', 'ready', 'draining']);

/** The counts the test asserts and the benchmark prints. */
export function countRecords(records: readonly StreamRecord[], killAt: number, cutDeadlineMs: number): FailoverCounts {
  const after = records.filter((r) => r.startedAt > killAt);
  const cut = records.filter((r) => r.outcome === 'cut');
  return {
    total: records.length,
    completed: records.filter((r) => r.outcome === 'ok').length,
    failed: records.filter((r) => r.outcome === 'failed').length,
    cut: cut.length,
    hung: records.filter((r) => r.outcome === 'hung').length,
    startedAfterKill: after.length,
    failedAfterKill: after.filter((r) => r.outcome !== 'ok').length,
    cutBadly: cut.filter((r) => !r.errorEvent || r.endedAt - killAt > cutDeadlineMs).length,
    inFlightAtKill: records.filter((r) => r.startedAt <= killAt && r.endedAt >= killAt).length,
  };
}

/** Runs the whole scenario and stops every process it started, whatever happens. */
export async function runFailoverScenario(options: FailoverOptions): Promise<FailoverResult> {
  const { log } = options;
  const cluster = new TestCluster();
  try {
    return await scenario(cluster, options);
  } catch (error) {
    log(describeCluster(cluster, 40));
    throw error;
  } finally {
    const left = await cluster.stop(5_000);
    if (left.length > 0) log(`killed ${left.length} engine process(es) the stopped agents left running (engines outlive their agent by design): ${left.map((p) => `${p.pid} ${p.comm}`).join(', ')}`);
  }
}

async function scenario(cluster: TestCluster, options: FailoverOptions): Promise<FailoverResult> {
  const { log } = options;
  const weights = fakeWeightsDir(cluster, FAILOVER_MODEL);
  const catalogFile = cluster.writeFile(
    'catalog.yaml',
    [
      'models:',
      `  - name: ${FAILOVER_MODEL}`,
      `    source: file://${weights}`,
      '    size: 1GB',
      '    replicas: 2',
      '    profiles:',
      '      - engine: vllm',
      '        gpuClass: H100-80GB',
      // A whole node per replica (tensor parallel 8), so the two replicas sit on two of the three nodes.
      '        gpusPerNode: 8',
      '        tensorParallel: 8',
      // sim-engine flags: ~0.4 s streams of exactly TOKENS tokens.
      `        args: ["--decode-tps", "80", "--output-tokens", "${TOKENS}", "--output-jitter", "0"]`,
      '',
    ].join('\n'),
  );

  // 1. Control plane with short health windows: unreachable after 1.5 s, lost after 3 s.
  log('starting controller, catalog API, router and four agents');
  await cluster.startController({
    LLMGW_CONTROLLER_CATALOG_FILE: catalogFile,
    LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '500ms',
    LLMGW_CONTROLLER_UNREACHABLE_AFTER: '1500ms',
    LLMGW_CONTROLLER_LOST_AFTER: '3s',
    LLMGW_CONTROLLER_TICK: '250ms',
    LLMGW_CONTROLLER_SETTLE: '1s',
    LLMGW_CONTROLLER_BACKOFF_MIN: '500ms',
  });
  const gpuEnv = { [AGENT_ENV.fakeGpus]: '8xH100-80GB', [AGENT_ENV.engineOverride]: 'sim' };
  const [router, , ...agents] = await Promise.all([
    cluster.startRouter({ LLMGW_ROUTER_SCRAPE_INTERVAL: '250ms', LLMGW_ROUTER_CONNECT_TIMEOUT: '1s' }),
    cluster.startCatalog(),
    cluster.startAgent('gpu-a', gpuEnv),
    cluster.startAgent('gpu-b', gpuEnv),
    cluster.startAgent('gpu-c', gpuEnv),
    cluster.startAgent('cpu-a'),
  ]);
  const base = `${router.url}/v1`;

  // 2. Both replicas ready, and the router serving.
  const initial = await until(
    async () => {
      const ready = (await cluster.replicas(FAILOVER_MODEL)).filter((r) => r.state === 'ready');
      return ready.length === 2 ? ready : undefined;
    },
    120_000,
    'two ready replicas',
  );
  await until(async () => (await probeServing(base, FAILOVER_MODEL)).ready, 60_000, 'the router to serve the model');
  log(`replicas ready on ${initial.map((r) => r.members[0]?.nodeId).join(' and ')}`);

  // 3. Load; the kill and the watch for the replacement run beside it.
  const loadStart = performance.now();
  const load = runStreamingLoad({
    url: `${base}/chat/completions`,
    model: FAILOVER_MODEL,
    clients: options.clients,
    until: loadStart + options.loadMs,
    maxTokens: TOKENS,
    stallDeadlineMs: 30_000,
  });
  await sleep(options.killAfterMs);

  // The replica carrying the most streams right now: the kill must hit traffic.
  const running = await Promise.all(
    initial.map(async (r) => ({
      r,
      running: r.url ? await engineGauge(r.url, 'vllm:num_requests_running').catch(() => -1) : -1,
      served: r.url ? await servedRequests(r.url).catch(() => -1) : -1,
    })),
  );
  log(`before the kill: ${running.map((x) => `${x.r.members[0]?.nodeId} running ${x.running}, served ${x.served}`).join('; ')}`);
  const victim = running.reduce((a, b) => (b.running > a.running ? b : a)).r;
  const deadNode = victim.members[0].nodeId;
  const port = victim.members[0].port;
  const agent = agents.find((a) => cluster.descendants(a).some((p) => enginePort(p.pid) === port));
  if (!agent) throw new Error(`no agent runs the engine on port ${port} of replica ${victim.id} (node ${deadNode})`);
  const beforeKill = performance.now();
  const killedPids = killWithEngines(cluster, agent);
  const killAt = performance.now();
  log(`killed ${agent.name} (node ${deadNode}) and its engines with SIGKILL in ${(killAt - beforeKill).toFixed(1)} ms: pids ${killedPids.join(', ')}`);
  void (async () => {
    const running = (): boolean => {
      const table = readProcessTable();
      return killedPids.some((pid) => (table.get(pid)?.state ?? 'Z') !== 'Z');
    };
    while (running()) await sleep(5);
    log(`every killed process gone ${(performance.now() - killAt).toFixed(0)} ms after the kill`);
  })();

  const watch = watchRecovery(cluster, deadNode, new Set(initial.map((r) => r.id)), killAt, loadStart + options.loadMs + 60_000);
  const records = await load;
  const recovery = await watch;
  log(`load finished: ${records.length} requests`);

  // 4. End state: two replicas again, none left on the dead node.
  const finalReplicas = await until(
    async () => {
      const all = await cluster.replicas(FAILOVER_MODEL);
      const live = all.filter((r) => LIVE.has(r.state));
      const ready = live.filter((r) => r.state === 'ready');
      return ready.length === 2 && !live.some((r) => r.members.some((m) => m.nodeId === deadNode)) ? all : undefined;
    },
    30_000,
    'two ready replicas, none on the dead node',
  ).catch(async () => cluster.replicas(FAILOVER_MODEL));

  return {
    records,
    killAt,
    deadNode,
    killedPids,
    ...recovery,
    finalReplicas,
    counts: countRecords(records, killAt, options.cutDeadlineMs),
  };
}

/** SIGKILLs the agent's process group and every process below it (its engines run in groups of their own), all at once. */
function killWithEngines(cluster: TestCluster, agent: AgentHandle): number[] {
  const pids = [agent.proc.pid, ...cluster.descendants(agent).map((p) => p.pid)];
  for (const pid of pids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // not a group leader
    }
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  return pids;
}

/** The `--port` an engine process was started with, from its command line. */
function enginePort(pid: number): number | undefined {
  const argv = cmdline(pid);
  const i = argv.indexOf('--port');
  return i >= 0 ? Number(argv[i + 1]) : undefined;
}

/** Polls the controller (node state, replicas) and the replacement engine's own metrics until it has served. */
async function watchRecovery(cluster: TestCluster, deadNode: string, before: ReadonlySet<string>, killAt: number, deadline: number) {
  let unreachableAfterMs: number | undefined;
  let lostAfterMs: number | undefined;
  let replacementReadyAfterMs: number | undefined;
  let replacementServingAfterMs: number | undefined;
  let replacementNode: string | undefined;
  let replacementUrl: string | undefined;
  while (performance.now() < deadline && replacementServingAfterMs === undefined) {
    const now = () => Math.round(performance.now() - killAt);
    try {
      const node = (await cluster.nodes()).find((n) => n.id === deadNode);
      if (node?.state === 'unreachable') unreachableAfterMs ??= now();
      if (node?.state === 'lost' || node === undefined) {
        unreachableAfterMs ??= now();
        lostAfterMs ??= now();
      }
      if (replacementUrl === undefined) {
        const fresh = (await cluster.replicas(FAILOVER_MODEL)).find((r) => !before.has(r.id) && r.state === 'ready' && r.url !== undefined);
        if (fresh) {
          replacementReadyAfterMs = now();
          replacementNode = fresh.members[0]?.nodeId;
          replacementUrl = fresh.url;
        }
      }
      if (replacementUrl !== undefined && (await servedRequests(replacementUrl)) > 0) replacementServingAfterMs = now();
    } catch {
      // The controller is busy; try again.
    }
    await sleep(100);
  }
  return { unreachableAfterMs, lostAfterMs, replacementReadyAfterMs, replacementServingAfterMs, replacementNode };
}

/** Sum of `vllm:request_success_total` an engine reports: requests it finished. */
async function servedRequests(engineUrl: string): Promise<number> {
  const text = await (await fetch(`${engineUrl.replace(/\/$/, '')}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith('vllm:request_success_total')) sum += Number(line.split(' ').pop());
  return sum;
}

/** Sum of one gauge's samples on an engine's /metrics. */
async function engineGauge(engineUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${engineUrl.replace(/\/$/, '')}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').pop());
  return sum;
}

async function until<T>(fn: () => Promise<T | undefined | false>, deadlineMs: number, what: string): Promise<T> {
  const end = performance.now() + deadlineMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (error) {
      last = error;
    }
    if (performance.now() > end) throw new Error(`waited ${deadlineMs} ms for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await sleep(200);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
