// Routing benchmark (issue #14 item 5, first part): 8 sim-engine replicas (vLLM flavour, prefix
// cache on) behind one llmgw-router, streaming clients in a closed loop, once per routing policy
// and workload, each run on fresh engines (cold caches) for --seconds, measured after a --warmup
// (steady state; the warm-up's requests are not counted). Reports mean/p50/p99 TTFT (to the first
// content chunk), output tokens/s, the prefix-cache hit rate from the engines' own counters and
// max ÷ mean of the replicas' average running sequences, with ratios against round-robin of the
// same workload in the same run.
// Workloads: shared (multi-turn conversations over 20 system prompts of ~2k tokens), random (a
// fresh ~2k-token prompt per request: the negative control), hot (half the conversations on one
// system prompt), churn (the shared workload for a fixed time, closed loop; mid-run the controller
// removes one replica and adds a fresh one: how long the hit rate takes to come back).
// The engines are calibrated to vLLM serving Llama 3.1 8B on one L4 (sim-engine --profile
// l4-llama-3.1-8b; tools/sim-engine/README.md, "Calibration").
// Usage: node tools/run.cjs tools/bench/routing.bench.ts [--clients 16] [--turns 4] [--seconds 75] [--random-seconds 200] [--warmup 25]
//        [--policies round-robin,least-load,prefix-affinity] [--workloads shared,random,hot,churn] [--routers 1]
//        [--churn-seconds 90] [--epsilon E] [--output-jitter 0] [--no-write]
// --output-jitter spreads each answer's length (sim-engine's flag: uniformly within ±F of the output
// tokens); 0, the default, gives every answer the same length.
// --epsilon sets prefix-affinity's load slack ε (the catalog's routing.prefixAffinity.epsilon; default the router's).
// The churn workload routes through a controller's watch stream (a fake controller serving the real
// RouterService contract), since a static config cannot change under a running router; it writes
// its own section ("under churn").
// --routers 1,3 runs every policy and workload behind one router and then behind three (each with
// the same static config, sharing nothing; client i sends to router i mod 3), to show that N
// routers agree on where a prefix goes; it writes its own section ("one router against three").
// Everything runs on 127.0.0.1 and every phase is bounded. Writes its section of docs/benchmarks.md unless --no-write.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { EngineKind, RoutingPolicy, type EndpointSnapshot } from '@llmgw/proto';
import { inheritedTestEnv, runTsEntry, spawnProcess, stopAllSpawned, useTestPki, waitFor, type SpawnedProcess } from '@llmgw/testing';
import { FakeController } from '../../apps/router/src/test/router.harness';
import { machineLine, markdownTable, percentile, percentileInterval, printTable, writeSection } from './bench-report';

const { values: args } = parseArgs({
  options: {
    clients: { type: 'string', default: '16' },
    turns: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '75' },
    'random-seconds': { type: 'string', default: '200' },
    warmup: { type: 'string', default: '25' },
    policies: { type: 'string', default: 'round-robin,least-load,prefix-only,prefix-affinity' },
    workloads: { type: 'string', default: 'shared,random,hot,churn' },
    'churn-seconds': { type: 'string', default: '90' },
    epsilon: { type: 'string' },
    'output-jitter': { type: 'string', default: '0' },
    routers: { type: 'string', default: '1' },
    'no-write': { type: 'boolean', default: false },
  },
});
const CLIENTS = Number(args.clients);
const TURNS = Number(args.turns);
const RUN_SECONDS = Number(args.seconds);
const RANDOM_SECONDS = Number(args['random-seconds']);
const WARMUP_SECONDS = Number(args.warmup);
for (const [name, v, max] of [['clients', CLIENTS, 256], ['turns', TURNS, 20], ['seconds', RUN_SECONDS, 600], ['random-seconds', RANDOM_SECONDS, 600]] as const) {
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`--${name}: expected a whole number 1..${max}, got ${v}`);
}
if (!Number.isInteger(WARMUP_SECONDS) || WARMUP_SECONDS < 0 || WARMUP_SECONDS >= Math.min(RUN_SECONDS, RANDOM_SECONDS)) {
  throw new Error(`--warmup: expected a whole number of seconds 0..${Math.min(RUN_SECONDS, RANDOM_SECONDS) - 1} (below --seconds and --random-seconds), got ${args.warmup}`);
}
/** How long a run of `workload` lasts: the random workload's requests take ~4× as long, so it runs longer for as stable a p99. */
const secondsOf = (workload: string): number => (workload === 'random' ? RANDOM_SECONDS : RUN_SECONDS);
const POLICIES = args.policies.split(',');
const ROUTER_COUNTS = args.routers.split(',').map(Number);
for (const n of ROUTER_COUNTS) if (!Number.isInteger(n) || n < 1 || n > 8) throw new Error(`--routers: expected router counts 1..8, got ${args.routers}`);
const WORKLOADS = args.workloads.split(',');
for (const p of POLICIES) if (!['round-robin', 'least-load', 'prefix-only', 'prefix-affinity'].includes(p)) throw new Error(`--policies: unknown policy ${p}`);
for (const w of WORKLOADS) if (!['shared', 'random', 'hot', 'churn'].includes(w)) throw new Error(`--workloads: unknown workload ${w}`);
const EPSILON = args.epsilon === undefined ? undefined : Number(args.epsilon);
if (EPSILON !== undefined && !(Number.isFinite(EPSILON) && EPSILON > 0 && EPSILON <= 10)) throw new Error(`--epsilon: expected a number above 0 and at most 10, got ${args.epsilon}`);
/**
 * Prefix-only (affinity without the load guard) is prefix-affinity with ε at the largest value the
 * catalog accepts: the cap, 11 × the mean occupancy, never binds with 16 clients on 8 replicas.
 */
const PREFIX_ONLY_EPSILON = 10;
/** A bench policy's ε: prefix-only's, or --epsilon for prefix-affinity when given. */
const epsilonOf = (policy: string): number | undefined => (policy === 'prefix-only' ? PREFIX_ONLY_EPSILON : policy === 'prefix-affinity' ? EPSILON : undefined);
/** The router policy behind a bench policy. */
const routerPolicy = (policy: string): string => (policy === 'prefix-only' ? 'prefix-affinity' : policy);
/** The model's routing in a static config: the policy, and prefix affinity's ε when set. */
const routingYaml = (policy: string): string => {
  const epsilon = epsilonOf(policy);
  return epsilon !== undefined ? `{ policy: ${routerPolicy(policy)}, prefixAffinity: { epsilon: ${epsilon} } }` : `{ policy: ${routerPolicy(policy)} }`;
};
const OUTPUT_JITTER = Number(args['output-jitter']);
if (!(Number.isFinite(OUTPUT_JITTER) && OUTPUT_JITTER >= 0 && OUTPUT_JITTER < 1)) throw new Error(`--output-jitter: expected 0 <= F < 1 (sim-engine's output length spread), got ${args['output-jitter']}`);
const CHURN_SECONDS = Number(args['churn-seconds']);
if (!Number.isInteger(CHURN_SECONDS) || CHURN_SECONDS < 30 || CHURN_SECONDS > 600) throw new Error(`--churn-seconds: expected a whole number 30..600, got ${args['churn-seconds']}`);

const REPLICAS = 8;
const SYSTEM_PROMPTS = 20;
const PROMPT_WORDS = 2000; // ~2k tokens in sim-engine's tokenizer (one per word; see words)
const MAX_TOKENS = 16;
const MODEL = 'm';
const PROFILE = 'l4-llama-3.1-8b';
const ENGINE_ARGS = ['--engine', 'vllm', '--served-model-name', MODEL, '--profile', PROFILE, '--prefix-cache', '--output-tokens', String(MAX_TOKENS), '--output-jitter', String(OUTPUT_JITTER)];

/**
 * Deterministic pseudo-random words (xorshift), so every run sends the same prompts: 3 to 6
 * lowercase letters each, one token apiece in sim-engine's tokenizer (which cuts letter runs at 6
 * characters and splits letters from digits), so n words are about n tokens.
 */
function words(seed: number, n: number): string {
  let x = (seed * 2654435761) >>> 0 || 1;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    let w = '';
    for (let k = 0, v = x; k < 3 + (x % 4); k++, v = Math.floor(v / 26)) w += String.fromCharCode(97 + (v % 26));
    out.push(w);
  }
  return out.join(' ');
}
const SYSTEMS = Array.from({ length: SYSTEM_PROMPTS }, (_, i) => `System prompt ${i}. ${words(i + 1, PROMPT_WORDS)}`);

interface Engine {
  readonly proc: SpawnedProcess;
  readonly url: string;
}

async function startEngine(i: number): Promise<Engine> {
  const proc = await spawnProcess({
    ...runTsEntry('tools/sim-engine/src/main.ts', ['--port', '0', '--seed', String(i), ...ENGINE_ARGS]),
    name: `sim-engine-${i}`,
    readyWhen: { stdoutMatch: /sim-engine ready/ },
    deadlineMs: 60_000,
  });
  return { proc, url: /listening on (http:\/\/[\d.]+:\d+)/.exec(proc.stdout)?.[1] ?? '' };
}

async function startRouter(dir: string, engines: readonly Engine[], policy: string, index: number): Promise<{ proc: SpawnedProcess; url: string }> {
  const config = join(dir, `router-${policy}.yaml`);
  const endpoints = engines.map((e, i) => `  - { id: r${i}, model: ${MODEL}, url: "${e.url}" }`).join('\n');
  writeFileSync(config, `models:\n  - { name: ${MODEL}, engine: vllm, routing: ${routingYaml(policy)} }\nendpoints:\n${endpoints}\n`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LLMGW_')));
  const proc = await spawnProcess({
    ...runTsEntry('apps/router/src/main.ts'),
    name: `llmgw-router-${policy}-${index}`,
    cleanEnv: true,
    env: { ...env, LLMGW_ROUTER_PORT: '0', LLMGW_DATA_DIR: dir, LLMGW_ROUTER_CONFIG_FILE: config, LLMGW_LOG_LEVEL: 'info', LLMGW_ROUTER_SCRAPE_INTERVAL: '200ms' },
    readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 60_000,
  });
  return { proc, url: proc.readyMatch?.[1] ?? '' };
}

/** Sum of one counter or gauge over its series in Prometheus text. */
function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name.replace(/[:]/g, '\\:')}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'gm'))) sum += Number(m[1]);
  return sum;
}

/** One streamed chat request: ms to the first content chunk, completion tokens seen. */
async function ask(url: string, messages: readonly { role: string; content: string }[]): Promise<{ ttftMs: number; tokens: number; text: string }> {
  const start = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages, max_tokens: MAX_TOKENS, stream: true }),
    signal: AbortSignal.timeout(120_000),
  });
  if (res.status !== 200 || res.body === null) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttftMs: number | undefined;
  let tokens = 0;
  let text = '';
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const piece of res.body) {
    buffered += decoder.decode(piece as Uint8Array, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const content = (JSON.parse(event.slice(6)) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
      if (content) {
        ttftMs ??= performance.now() - start;
        tokens++;
        text += content;
      }
    }
  }
  return { ttftMs: ttftMs ?? performance.now() - start, tokens, text };
}

interface RunResult {
  readonly requests: number;
  readonly ttft: number[];
  readonly tokensPerSecond: number;
  readonly hitRate: number;
  readonly maxOverMeanRunning: number;
}

/** The system prompt of a client's conversation `c` in a workload (undefined = a fresh random one per request). */
function systemFor(workload: string, client: number, c: number, turn: number): string {
  if (workload === 'random') return `Fresh prompt ${client}/${c}/${turn}. ${words(1_000 + client * 10_007 + c * 101 + turn, PROMPT_WORDS)}`;
  if (workload === 'hot' && (client + c) % 2 === 0) return SYSTEMS[0];
  return SYSTEMS[(client * 7 + c * 3) % SYSTEM_PROMPTS];
}

async function run(dir: string, policy: string, workload: string, routerCount: number): Promise<RunResult> {
  const engines = await Promise.all(Array.from({ length: REPLICAS }, (_, i) => startEngine(i)));
  const routers = await Promise.all(Array.from({ length: routerCount }, (_, i) => startRouter(dir, engines, policy, i)));
  const ttft: number[] = [];
  let tokens = 0;
  const runSeconds = secondsOf(workload);
  const started = performance.now();
  const elapsedS = (): number => (performance.now() - started) / 1000;
  const counters = async (): Promise<{ hits: number; queries: number }> => {
    const texts = await Promise.all(engines.map(async (e) => (await fetch(`${e.url}/metrics`)).text()));
    return { hits: texts.reduce((s, t) => s + metricSum(t, 'vllm:prefix_cache_hits_total'), 0), queries: texts.reduce((s, t) => s + metricSum(t, 'vllm:prefix_cache_queries_total'), 0) };
  };
  // After the warm-up: the engines' cache counters, then every replica's running count every 50 ms
  // (average per replica → max ÷ mean) until the clients stop.
  const runningSums = new Array<number>(REPLICAS).fill(0);
  let samples = 0;
  let done = false;
  let atWarm: { hits: number; queries: number; t: number } | undefined;
  const sampler = (async () => {
    while (!done && elapsedS() < WARMUP_SECONDS) await new Promise((r) => setTimeout(r, 50));
    if (done) return;
    atWarm = { ...(await counters()), t: elapsedS() };
    while (!done) {
      const texts = await Promise.all(engines.map(async (e) => (await fetch(`${e.url}/metrics`)).text()));
      texts.forEach((t, i) => (runningSums[i] += metricSum(t, 'vllm:num_requests_running')));
      samples++;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let c = 0; elapsedS() < runSeconds; c++) {
        const messages: { role: string; content: string }[] = [];
        for (let turn = 0; turn < TURNS && elapsedS() < runSeconds; turn++) {
          if (workload === 'random' || turn === 0) messages.splice(0, messages.length, { role: 'system', content: systemFor(workload, client, c, turn) });
          messages.push({ role: 'user', content: `Client ${client}, conversation ${c}, question ${turn}: ${words(client * 1_000 + c * 10 + turn, 20)}` });
          const at = elapsedS();
          const r = await ask(routers[client % routers.length].url, messages);
          if (at >= WARMUP_SECONDS) {
            ttft.push(r.ttftMs);
            tokens += r.tokens;
          }
          messages.push({ role: 'assistant', content: r.text });
        }
      }
    }),
  );
  const end = { ...(await counters()), t: elapsedS() };
  done = true;
  await sampler;
  const averages = runningSums.map((s) => s / Math.max(1, samples));
  const mean = averages.reduce((s, v) => s + v, 0) / averages.length;
  await stopAllSpawned();
  const warm = atWarm ?? { hits: 0, queries: 0, t: 0 };
  const queries = end.queries - warm.queries;
  return {
    requests: ttft.length,
    ttft,
    tokensPerSecond: tokens / Math.max(1e-9, end.t - warm.t),
    hitRate: queries > 0 ? (end.hits - warm.hits) / queries : 0,
    maxOverMeanRunning: mean > 0 ? Math.max(...averages) / mean : 0,
  };
}

// ---------------------------------------------------------------------------------------------
// (d) churn: one replica removed and a fresh one added mid-run, through a controller's watch.

const POLICY_OF: Record<string, RoutingPolicy> = {
  'round-robin': RoutingPolicy.ROUTING_POLICY_ROUND_ROBIN,
  'least-load': RoutingPolicy.ROUTING_POLICY_LEAST_LOAD,
  'prefix-affinity': RoutingPolicy.ROUTING_POLICY_PREFIX_AFFINITY,
};

/** The controller's snapshot: `members` of `engines` serving MODEL under `policy`. */
function churnSnapshot(revision: number, engines: readonly Engine[], members: readonly number[], policy: string): EndpointSnapshot {
  return {
    revision,
    endpoints: members.map((i) => ({ replicaId: `r${i}`, model: MODEL, url: engines[i].url, engine: EngineKind.ENGINE_KIND_VLLM, nodeId: `node-${i}`, suspect: false })),
    catalog: { revision: 1, models: [{ name: MODEL, aliases: [], engine: EngineKind.ENGINE_KIND_VLLM, metrics: undefined, endpoints: [], routing: { policy: POLICY_OF[routerPolicy(policy)], ...(epsilonOf(policy) !== undefined && { epsilon: epsilonOf(policy) }) } }] },
  };
}

async function startWatchingRouter(dir: string, controller: FakeController, policy: string, index: number): Promise<{ proc: SpawnedProcess; url: string }> {
  const proc = await spawnProcess({
    ...runTsEntry('apps/router/src/main.ts'),
    name: `llmgw-router-churn-${policy}-${index}`,
    cleanEnv: true,
    env: {
      ...inheritedTestEnv(),
      LLMGW_ROUTER_PORT: '0',
      LLMGW_DATA_DIR: dir,
      LLMGW_ROUTER_ID: `bench-router-${index}`,
      LLMGW_ROUTER_CONTROLLER: controller.address,
      LLMGW_LOG_LEVEL: 'info',
      LLMGW_ROUTER_SCRAPE_INTERVAL: '200ms',
    },
    readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 60_000,
  });
  const url = proc.readyMatch?.[1] ?? '';
  await waitFor(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200 || undefined, { deadlineMs: 30_000, intervalMs: 100, message: `router ${index} ready on the first snapshot` });
  return { proc, url };
}

interface ChurnResult {
  readonly requests: number;
  /** Hit rate over the 20 s before the change. */
  readonly before: number;
  /** Hit rate in each 5 s window after the change. */
  readonly after: readonly number[];
  /** Seconds from the change to the end of the first 5 s window within 5 points of `before`; undefined = never. */
  readonly recoveredS: number | undefined;
  readonly ttftBefore: number[];
  readonly ttftAfter: number[];
}

async function runChurn(dir: string, policy: string, routerCount: number): Promise<ChurnResult> {
  // Nine engines: r0..r7 serve at first; at mid-run r3 leaves and r8 (cold) joins.
  const engines = await Promise.all(Array.from({ length: REPLICAS + 1 }, (_, i) => startEngine(i)));
  const controller = new FakeController();
  await controller.start();
  try {
    const initial = Array.from({ length: REPLICAS }, (_, i) => i);
    controller.publish(churnSnapshot(1, engines, initial, policy));
    const routers = await Promise.all(Array.from({ length: routerCount }, (_, i) => startWatchingRouter(dir, controller, policy, i)));
    const changeAtS = Math.floor(CHURN_SECONDS / 2);
    // Per-second samples of the engines' summed prefix-cache counters.
    const samples: { t: number; hits: number; queries: number }[] = [];
    const started = performance.now();
    const elapsedS = (): number => (performance.now() - started) / 1000;
    let done = false;
    let changed = false;
    const sampler = (async () => {
      while (!done) {
        const texts = await Promise.all(engines.map(async (e) => (await fetch(`${e.url}/metrics`)).text()));
        samples.push({
          t: elapsedS(),
          hits: texts.reduce((sum, t) => sum + metricSum(t, 'vllm:prefix_cache_hits_total'), 0),
          queries: texts.reduce((sum, t) => sum + metricSum(t, 'vllm:prefix_cache_queries_total'), 0),
        });
        if (!changed && elapsedS() >= changeAtS) {
          changed = true;
          controller.publish(churnSnapshot(2, engines, [...initial.filter((i) => i !== 3), REPLICAS], policy));
        }
        await new Promise((r) => setTimeout(r, 1_000));
      }
    })();
    const ttft: { at: number; ms: number }[] = [];
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        for (let c = 0; elapsedS() < CHURN_SECONDS; c++) {
          const messages: { role: string; content: string }[] = [{ role: 'system', content: systemFor('shared', client, c, 0) }];
          for (let turn = 0; turn < TURNS && elapsedS() < CHURN_SECONDS; turn++) {
            messages.push({ role: 'user', content: `Client ${client}, conversation ${c}, question ${turn}: ${words(client * 1_000 + c * 10 + turn, 20)}` });
            const at = elapsedS();
            const r = await ask(routers[client % routers.length].url, messages);
            ttft.push({ at, ms: r.ttftMs });
            messages.push({ role: 'assistant', content: r.text });
          }
        }
      }),
    );
    done = true;
    await sampler;
    const rateBetween = (from: number, to: number): number | undefined => {
      const a = samples.filter((x) => x.t >= from).at(0);
      const b = samples.filter((x) => x.t <= to).at(-1);
      if (a === undefined || b === undefined || b.queries - a.queries <= 0) return undefined;
      return (b.hits - a.hits) / (b.queries - a.queries);
    };
    const before = rateBetween(changeAtS - 20, changeAtS) ?? 0;
    const after: number[] = [];
    let recoveredS: number | undefined;
    for (let w = changeAtS; w + 5 <= CHURN_SECONDS; w += 5) {
      const rate = rateBetween(w, w + 5) ?? 0;
      after.push(rate);
      if (recoveredS === undefined && rate >= before - 0.05) recoveredS = w + 5 - changeAtS;
    }
    return {
      requests: ttft.length,
      before,
      after,
      recoveredS,
      ttftBefore: ttft.filter((x) => x.at >= changeAtS - 20 && x.at < changeAtS).map((x) => x.ms),
      ttftAfter: ttft.filter((x) => x.at >= changeAtS && x.at < changeAtS + 30).map((x) => x.ms),
    };
  } finally {
    controller.stop();
    await stopAllSpawned();
  }
}

async function churnSection(dir: string): Promise<void> {
  const pki = await useTestPki();
  const rows: string[][] = [['policy', 'routers', 'requests', 'hit rate 20 s before', 'hit rate per 5 s after (first six)', 'recovered within', 'mean TTFT before ms', 'mean TTFT 30 s after ms']];
  const mean = (xs: readonly number[]): string => (xs.length === 0 ? '-' : (xs.reduce((s, v) => s + v, 0) / xs.length).toFixed(1));
  const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;
  try {
    for (const policy of POLICIES) {
      for (const routerCount of ROUTER_COUNTS) {
        const r = await runChurn(dir, policy, routerCount);
        rows.push([
          policy,
          String(routerCount),
          String(r.requests),
          pct(r.before),
          r.after.slice(0, 6).map((x) => (100 * x).toFixed(0)).join(' / '),
          r.recoveredS === undefined ? 'not within the run' : `${r.recoveredS} s`,
          mean(r.ttftBefore),
          mean(r.ttftAfter),
        ]);
        process.stdout.write(`churn ${policy} ${routerCount} router(s): ${r.requests} requests, hit rate ${pct(r.before)} before, recovered ${r.recoveredS ?? '-'} s\n`);
      }
    }
  } finally {
    rmSync(pki.dir, { recursive: true, force: true });
  }
  printTable(rows);
  if (args['no-write']) return;
  const given = process.argv.slice(2).filter((a) => a !== '--no-write');
  const path = writeSection(
    'routing-churn',
    'Routing over 8 sim-engine replicas under churn',
    [
      `Command: \`npm run bench:routing${given.length > 0 ? ` -- ${given.join(' ')}` : ''}\` (the churn workload; \`node tools/run.cjs tools/bench/routing.bench.ts\`).`,
      '',
      machineLine(os.cpus(), os.totalmem()),
      '',
      `Setup: 9 sim-engine replicas (vLLM flavour, --profile ${PROFILE}: Llama 3.1 8B on one L4, prefix cache on, ${MAX_TOKENS} output tokens${OUTPUT_JITTER > 0 ? ` ± ${Math.round(OUTPUT_JITTER * 100)} %` : ''}); the router${ROUTER_COUNTS.some((n) => n > 1) ? 's follow' : ' follows'} a controller's watch stream (a fake controller on the real RouterService contract) that first lists r0..r7 and, ${Math.floor(CHURN_SECONDS / 2)} s into a ${CHURN_SECONDS} s run, removes r3 and adds r8 (cold cache). ${CLIENTS} streaming clients in a closed loop run the shared workload (${SYSTEM_PROMPTS} system prompts of ~${PROMPT_WORDS} tokens, conversations of ${TURNS} turns) for the whole run. Hit rate = the engines' summed vllm:prefix_cache_hits_total ÷ queries_total over the window, sampled every second. "Recovered within" = the end of the first 5 s window after the change whose hit rate is within 5 points of the 20 s before it.`,
      '',
      markdownTable(rows),
    ].join('\n'),
  );
  process.stdout.write(`wrote ${path}\n`);
}

/** A percentile's confidence interval as text: "lower–upper", a missing bound as "?" (the samples cannot give it). */
function intervalText(i: { lower?: number; upper?: number }): string {
  return `${i.lower?.toFixed(0) ?? '?'}–${i.upper?.toFixed(0) ?? '?'}`;
}

async function matrixSection(dir: string): Promise<void> {
  const rows: string[][] = [['workload', 'policy', 'routers', 'requests', 'mean TTFT ms', 'p50 ms', 'p99 ms', 'p99 95 % CI ms', 'mean vs RR', 'p99 vs RR', 'output tok/s', 'cache hit rate', 'max/mean running']];
  try {
    for (const workload of WORKLOADS.filter((w) => w !== 'churn')) {
      let base: { mean: number; p99: number } | undefined;
      for (const policy of POLICIES) {
        for (const routerCount of ROUTER_COUNTS) {
          const r = await run(dir, policy, workload, routerCount);
          const mean = r.ttft.reduce((s, v) => s + v, 0) / r.ttft.length;
          const p99 = percentile(r.ttft, 99);
          if (policy === 'round-robin' && routerCount === ROUTER_COUNTS[0]) base = { mean, p99 };
          const vs = (v: number, b: number | undefined) => (b === undefined ? '-' : `${(b / v).toFixed(2)}×`);
          rows.push([
            workload,
            policy,
            String(routerCount),
            String(r.requests),
            mean.toFixed(1),
            percentile(r.ttft, 50).toFixed(1),
            p99.toFixed(1),
            intervalText(percentileInterval(r.ttft, 99)),
            vs(mean, base?.mean),
            vs(p99, base?.p99),
            r.tokensPerSecond.toFixed(0),
            `${(100 * r.hitRate).toFixed(1)} %`,
            r.maxOverMeanRunning.toFixed(2),
          ]);
          process.stdout.write(`${workload} ${policy} ${routerCount} router(s): ${r.requests} requests, mean TTFT ${mean.toFixed(1)} ms, hit rate ${(100 * r.hitRate).toFixed(1)} %\n`);
        }
      }
    }
  } finally {
    await stopAllSpawned();
  }
  printTable(rows);
  if (args['no-write']) return;
  const several = ROUTER_COUNTS.some((n) => n > 1);
  const given = process.argv.slice(2).filter((a) => a !== '--no-write');
  const command = `npm run bench:routing${given.length > 0 ? ` -- ${given.join(' ')}` : ''}`;
  const path = writeSection(
    several ? 'routing-routers' : 'routing',
    several ? 'Routing over 8 sim-engine replicas: one router against several' : 'Routing policies over 8 sim-engine replicas',
    [
      `Command: \`${command}\` (\`node tools/run.cjs tools/bench/routing.bench.ts${given.length > 0 ? ` ${given.join(' ')}` : ''}\`).`,
      '',
      machineLine(os.cpus(), os.totalmem()),
      '',
      `Setup: 8 sim-engine replicas (vLLM flavour, --profile ${PROFILE}: Llama 3.1 8B on one L4, i.e. prefill 3500 tok/s, decode 15 tok/s, 30,720 KV tokens; tools/sim-engine/README.md, "Calibration"; prefix cache on, ${MAX_TOKENS} output tokens${OUTPUT_JITTER > 0 ? ` ± ${Math.round(OUTPUT_JITTER * 100)} %` : ''}) behind ${several ? `${ROUTER_COUNTS.join(' or ')} llmgw-routers (each with the same static config, sharing nothing; client i sends to router i mod N)` : 'one llmgw-router'} (scrapes every 200 ms), fresh engines and routers for every run. ${CLIENTS} streaming clients in a closed loop for ${RUN_SECONDS} s (random: ${RANDOM_SECONDS} s, for as many requests), each running conversations of ${TURNS} turns (each turn resends the conversation so far); everything is measured over the last ${RUN_SECONDS - WARMUP_SECONDS} s (random: ${RANDOM_SECONDS - WARMUP_SECONDS} s) only (requests sent after a ${WARMUP_SECONDS} s warm-up that fills the caches, the same for every policy), and "requests" counts those. Workloads: shared = ${SYSTEM_PROMPTS} system prompts of ~${PROMPT_WORDS} tokens; random = a fresh ~${PROMPT_WORDS}-token prompt every request; hot = half the conversations on one system prompt. TTFT = time to the first content chunk at the client. "p99 95 % CI" is the range of requests' TTFTs that holds the true p99 with 95 % confidence (exact binomial order statistics; "?" where there are too few requests beyond the p99 to bound it): two p99s whose ranges overlap are not shown to differ. Hit rate = vllm:prefix_cache_hits_total ÷ vllm:prefix_cache_queries_total summed over the engines. max/mean running = the busiest replica's average running sequences over the mean of all replicas' averages (sampled every 50 ms). Ratios "vs RR" are round-robin's value (behind ${ROUTER_COUNTS[0]} router${ROUTER_COUNTS[0] > 1 ? 's' : ''}) ÷ this row's (above 1 = better). Round-robin here is the router's round-robin policy; prefix-only is prefix-affinity with ε = ${PREFIX_ONLY_EPSILON}, the largest the catalog accepts, so its load cap never binds here (affinity without the guard). Engines, routers and clients share the machine's cores, so TTFT moves between runs with whatever else runs; hit rate and max/mean running move less. Churn has its own section.`,
      '',
      markdownTable(rows),
    ].join('\n'),
  );
  process.stdout.write(`wrote ${path}\n`);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(os.tmpdir(), 'llmgw-routing-bench-'));
  try {
    if (WORKLOADS.some((w) => w !== 'churn')) await matrixSection(dir);
    if (WORKLOADS.includes('churn')) await churnSection(dir);
  } finally {
    await stopAllSpawned();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch(async (error: unknown) => {
  process.stderr.write(`routing.bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await stopAllSpawned();
  process.exit(1);
});
