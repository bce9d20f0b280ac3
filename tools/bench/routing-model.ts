// A model of bench:routing in virtual time: the same engine model (sim-engine's BatchScheduler,
// --profile l4-llama-3.1-8b: prefill 3,500 tok/s, decode 15 tok/s, 30,720 KV tokens, prefix
// cache on), the same workloads and closed-loop clients, and the router's own policy code
// (libs/routing: the picker with the default scorer weights, chooseByAffinity, RoundRobin), with
// no processes, sockets or CPU contention. 75 s of traffic take about a second, so a policy change
// can be tried on every workload and several seeds before the real benchmark (minutes per run)
// measures it.
// What it leaves out: the router's HTTP path and the machine's shared cores (a request's TTFT
// here is the engine's plus --overhead-ms, jittered), and token counts are exact (prompt words
// are tokens). Use it for what moves between policies, not for absolute figures.
// Usage: node tools/run.cjs tools/bench/routing-model.ts [--policies round-robin,least-load,prefix-only,prefix-affinity]
//        [--workloads shared,random,hot] [--seeds 3] [--seconds 75] [--warmup 25] [--clients 16]
//        [--prompt-tokens 2000] [--epsilon 0.25] [--scrape-ms 200] [--overhead-ms 5] [--output-jitter 0]
import { parseArgs } from 'node:util';
import type { Clock } from '@llmgw/domain';
import { buildScorers, chooseByAffinity, DEFAULT_SCORER_WEIGHTS, EndpointPicker, guardLoad, LoadAverage, RecentKeys, RoundRobin, type Candidate } from '@llmgw/routing';
import { SeededRng } from '@llmgw/testing';
import { BatchScheduler } from '../sim-engine/src/batch.scheduler';
import { PROFILES } from '../sim-engine/src/cli.parser';
import { percentile, printTable } from './bench-report';

const { values: args } = parseArgs({
  options: {
    policies: { type: 'string', default: 'round-robin,least-load,prefix-only,prefix-affinity' },
    workloads: { type: 'string', default: 'shared,random,hot' },
    seeds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '75' },
    warmup: { type: 'string', default: '25' },
    clients: { type: 'string', default: '16' },
    'prompt-tokens': { type: 'string', default: '2000' },
    epsilon: { type: 'string', default: '0.25' },
    'scrape-ms': { type: 'string', default: '200' },
    'overhead-ms': { type: 'string', default: '5' },
    'output-jitter': { type: 'string', default: '0' },
  },
});
const num = (name: keyof typeof args, min: number, max: number): number => {
  const v = Number(args[name]);
  if (!Number.isFinite(v) || v < min || v > max) throw new Error(`--${name}: expected a number ${min}..${max}, got ${String(args[name])}`);
  return v;
};
const SEEDS = num('seeds', 1, 50);
const SECONDS = num('seconds', 10, 3_600);
const WARMUP = num('warmup', 0, SECONDS - 1);
const CLIENTS = num('clients', 1, 1_024);
const PROMPT_TOKENS = num('prompt-tokens', 16, 20_000);
const EPSILON = num('epsilon', 0.001, 10);
const SCRAPE_MS = num('scrape-ms', 10, 10_000);
const OVERHEAD_MS = num('overhead-ms', 0, 1_000);
const OUTPUT_JITTER = num('output-jitter', 0, 0.99);
const POLICIES = args.policies.split(',');
const WORKLOADS = args.workloads.split(',');
for (const p of POLICIES) if (!['round-robin', 'least-load', 'prefix-only', 'prefix-affinity'].includes(p)) throw new Error(`--policies: unknown policy ${p}`);
for (const w of WORKLOADS) if (!['shared', 'random', 'hot'].includes(w)) throw new Error(`--workloads: unknown workload ${w}`);

const REPLICAS = 8;
const TURNS = 4;
const SYSTEM_PROMPTS = 20;
const USER_TOKENS = 20;
const OUTPUT_TOKENS = 16;
const PROFILE = PROFILES['l4-llama-3.1-8b'];

/** Deterministic token ids (xorshift) for a seed. */
function tokens(seed: number, n: number): number[] {
  let x = (seed * 2654435761) >>> 0 || 1;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push(x % 50_000);
  }
  return out;
}

interface Result {
  readonly ttft: number[];
  readonly hitRate: number;
  readonly maxOverMean: number;
}

function simulate(policy: string, workload: string, seed: number): Result {
  let now = 0;
  const clock: Clock = { now: () => now };
  const rng = new SeededRng(seed);
  const engines = Array.from(
    { length: REPLICAS },
    () => new BatchScheduler({ maxRunning: 256, maxBatchedTokens: 8192, batchSlowdown: 0.02, blockSize: 16, prefixCaching: true, ...PROFILE }, clock),
  );
  const inFlight = new Array<number>(REPLICAS).fill(0);
  // Each replica's guard load averaged over time, as the router keeps it: set whenever its load changes.
  const loadAverages = Array.from({ length: REPLICAS }, () => new LoadAverage());
  const noteLoad = (i: number): void => loadAverages[i].set(now, guardLoad(candidate(i)));
  const awaiting = new Array<number>(REPLICAS).fill(0);
  let scraped = engines.map(() => ({ running: 0, waiting: 0, kvUsage: 0, inFlight: 0 }));
  const picker = new EndpointPicker(buildScorers(DEFAULT_SCORER_WEIGHTS), rng);
  const roundRobin = new RoundRobin();
  const epsilon = policy === 'prefix-only' ? 10 : EPSILON;
  const candidate = (i: number): Candidate => ({
    id: `r${i}`,
    models: ['m'],
    suspect: false,
    draining: false,
    breaker: 'closed',
    probeAvailable: false,
    inFlight: inFlight[i],
    awaitingOutput: awaiting[i],
    load: { running: scraped[i].running, waiting: scraped[i].waiting, kvUsage: scraped[i].kvUsage },
    inFlightAtScrape: scraped[i].inFlight,
  });
  const candidates = (): Candidate[] => engines.map((_, i) => ({ ...candidate(i), averageLoad: loadAverages[i].read(now) }));
  const recentKeys = new RecentKeys();
  const byLoad = (cs: readonly Candidate[], ties: 'random' | 'first' = 'random'): Candidate => {
    const r = picker.choose(cs, ties);
    if (!r.ok) throw new Error('nothing picked');
    return r.chosen;
  };
  const choose = (key: number): number => {
    const cs = candidates();
    if (policy === 'round-robin') return roundRobin.choose(engines.map((_, i) => i));
    if (policy !== 'least-load') {
      const a = chooseByAffinity(key, cs, epsilon, undefined, recentKeys.placed(key) ? undefined : (under) => byLoad(under, 'first'));
      if (a !== undefined) return Number(a.chosen.id.slice(1));
    }
    return Number(byLoad(cs).id.slice(1));
  };

  const systems = Array.from({ length: SYSTEM_PROMPTS }, (_, i) => tokens(i + 1, PROMPT_TOKENS));
  const clients = Array.from({ length: CLIENTS }, () => ({ conversation: 0, turn: 0, prompt: [] as number[], system: 0 }));
  const sends: { at: number; client: number }[] = Array.from({ length: CLIENTS }, (_, client) => ({ at: client, client }));
  const ttft: number[] = [];
  const send = (client: number): void => {
    const c = clients[client];
    if (c.turn === 0 || workload === 'random') {
      c.system =
        workload === 'random'
          ? 1_000 + client * 10_007 + c.conversation * 101 + c.turn
          : workload === 'hot' && (client + c.conversation) % 2 === 0
            ? 0
            : (client * 7 + c.conversation * 3) % SYSTEM_PROMPTS;
      c.prompt = c.system < SYSTEM_PROMPTS ? [...systems[c.system]] : tokens(c.system, PROMPT_TOKENS);
    }
    c.prompt.push(...tokens(5_000_000 + client * 1_000 + c.conversation * 10 + c.turn, USER_TOKENS));
    const key = Math.imul(c.system + 1, 2654435761) >>> 0;
    const e = choose(key);
    const sentAt = now;
    inFlight[e]++;
    awaiting[e]++;
    noteLoad(e);
    // As sim-engine plans an answer: a length drawn from OUTPUT_TOKENS × (1 ± jitter), cut at max_tokens (OUTPUT_TOKENS).
    const lo = Math.max(1, Math.round(OUTPUT_TOKENS * (1 - OUTPUT_JITTER)));
    const hi = Math.max(lo, Math.round(OUTPUT_TOKENS * (1 + OUTPUT_JITTER)));
    const outputTokens = Math.min(OUTPUT_TOKENS, lo + Math.floor(rng.next() * (hi - lo + 1)));
    engines[e].submit(
      { promptTokens: [...c.prompt], outputTokens },
      {
        onToken: (index, at) => {
          if (index !== 0) return;
          awaiting[e]--;
          noteLoad(e);
          if (sentAt >= WARMUP * 1000) ttft.push(at - sentAt + OVERHEAD_MS);
        },
        onDone: (stats) => {
          inFlight[e]--;
          noteLoad(e);
          c.prompt.push(...tokens(stats.id * 31 + e, outputTokens));
          if (++c.turn >= TURNS) {
            c.turn = 0;
            c.conversation++;
          }
          // The client's next request, after a jittered round trip (without it the model runs in lockstep no real system has).
          sends.push({ at: (stats.finishedAt ?? now) + OVERHEAD_MS * (0.5 + 2 * rng.next()), client });
        },
      },
    );
  };

  const counters = (): { hits: number; queries: number } =>
    engines.reduce(
      (sum, e) => {
        const s = e.snapshot();
        return { hits: sum.hits + s.prefixCacheHitsTotal, queries: sum.queries + s.prefixCacheQueriesTotal };
      },
      { hits: 0, queries: 0 },
    );
  let atWarm: { hits: number; queries: number } | undefined;
  const runningSums = new Array<number>(REPLICAS).fill(0);
  let samples = 0;
  let nextScrape = 0;
  let nextSample = WARMUP * 1000;
  while (now < SECONDS * 1000) {
    // The next event: a scrape, a running-count sample, an engine step's end or a client's send.
    let next = Math.min(nextScrape, nextSample);
    let engine = -1;
    let sendIndex = -1;
    engines.forEach((e, i) => {
      const at = e.nextEventAt();
      if (at !== undefined && at < next) {
        next = at;
        engine = i;
      }
    });
    sends.forEach((s, i) => {
      if (s.at < next) {
        next = s.at;
        sendIndex = i;
        engine = -1;
      }
    });
    now = next;
    if (sendIndex >= 0) send(sends.splice(sendIndex, 1)[0].client);
    else if (engine >= 0) engines[engine].advance();
    else if (now === nextScrape) {
      scraped = engines.map((e, i) => {
        const s = e.snapshot();
        return { running: s.running, waiting: s.waiting, kvUsage: s.kvUsage, inFlight: inFlight[i] };
      });
      for (let i = 0; i < REPLICAS; i++) noteLoad(i);
      nextScrape += SCRAPE_MS;
      if (atWarm === undefined && now >= WARMUP * 1000) atWarm = counters();
    } else {
      engines.forEach((e, i) => (runningSums[i] += e.snapshot().running));
      samples++;
      nextSample += 50;
    }
  }
  const end = counters();
  const warm = atWarm ?? { hits: 0, queries: 0 };
  const averages = runningSums.map((s) => s / Math.max(1, samples));
  const mean = averages.reduce((s, v) => s + v, 0) / REPLICAS;
  return { ttft, hitRate: end.queries > warm.queries ? (end.hits - warm.hits) / (end.queries - warm.queries) : 0, maxOverMean: mean > 0 ? Math.max(...averages) / mean : 0 };
}

const rows: string[][] = [['workload', 'policy', 'requests/seed', 'mean TTFT ms', 'p50 ms', 'p99 ms', 'mean vs RR', 'p99 vs RR', 'hit rate', 'max/mean running']];
for (const workload of WORKLOADS) {
  let base: { mean: number; p99: number } | undefined;
  for (const policy of POLICIES) {
    const runs = Array.from({ length: SEEDS }, (_, s) => simulate(policy, workload, s + 1));
    const all = runs.flatMap((r) => r.ttft);
    const mean = all.reduce((s, v) => s + v, 0) / all.length;
    const p99 = percentile(all, 99);
    if (policy === 'round-robin') base = { mean, p99 };
    const avg = (f: (r: Result) => number): number => runs.reduce((s, r) => s + f(r), 0) / runs.length;
    const vs = (v: number, b: number | undefined): string => (b === undefined ? '-' : `${(b / v).toFixed(2)}×`);
    rows.push([
      workload,
      policy,
      (all.length / SEEDS).toFixed(0),
      mean.toFixed(0),
      percentile(all, 50).toFixed(0),
      p99.toFixed(0),
      vs(mean, base?.mean),
      vs(p99, base?.p99),
      `${(100 * avg((r) => r.hitRate)).toFixed(1)} %`,
      avg((r) => r.maxOverMean).toFixed(2),
    ]);
  }
}
process.stdout.write(
  `routing model: ${CLIENTS} clients, 8 replicas (${Object.entries(PROFILE)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')}), prompts ${PROMPT_TOKENS} tokens, ε ${EPSILON}, ${SECONDS} s per run measured after ${WARMUP} s, ${SEEDS} seed(s)\n\n`,
);
printTable(rows);

