// Routing benchmark (issue #14 item 5, first part): 8 sim-engine replicas (vLLM flavour, prefix
// cache on) behind one llmgw-router, streaming clients in a closed loop, once per routing policy
// and workload, each run on fresh engines (cold caches). Reports mean/p50/p99 TTFT (to the first
// content chunk), output tokens/s, the prefix-cache hit rate from the engines' own counters and
// max ÷ mean of the replicas' average running sequences, with ratios against round-robin of the
// same workload in the same run.
// Workloads: shared (multi-turn conversations over 20 system prompts of ~2k tokens), random (a
// fresh ~2k-token prompt per request: the negative control), hot (half the conversations on one
// system prompt).
// Usage: node tools/run.cjs tools/bench/routing.bench.ts [--clients 16] [--turns 4] [--conversations 5]
//        [--policies round-robin,least-load,prefix-affinity] [--workloads shared,random,hot] [--routers 1]
//        [--no-write]
// --routers 1,3 runs every policy and workload behind one router and then behind three (each with
// the same static config, sharing nothing; client i sends to router i mod 3), to show that N
// routers agree on where a prefix goes; it writes its own section ("one router against three").
// Everything runs on 127.0.0.1 and every phase is bounded. Writes its section of docs/benchmarks.md unless --no-write.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runTsEntry, spawnProcess, stopAllSpawned, type SpawnedProcess } from '@llmgw/testing';
import { machineLine, percentile, printTable, writeSection } from './bench-report';

const { values: args } = parseArgs({
  options: {
    clients: { type: 'string', default: '16' },
    turns: { type: 'string', default: '4' },
    conversations: { type: 'string', default: '5' },
    policies: { type: 'string', default: 'round-robin,least-load,prefix-affinity' },
    workloads: { type: 'string', default: 'shared,random,hot' },
    routers: { type: 'string', default: '1' },
    'no-write': { type: 'boolean', default: false },
  },
});
const CLIENTS = Number(args.clients);
const TURNS = Number(args.turns);
const CONVERSATIONS = Number(args.conversations);
for (const [name, v, max] of [['clients', CLIENTS, 256], ['turns', TURNS, 20], ['conversations', CONVERSATIONS, 100]] as const) {
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`--${name}: expected a whole number 1..${max}, got ${v}`);
}
const POLICIES = args.policies.split(',');
const ROUTER_COUNTS = args.routers.split(',').map(Number);
for (const n of ROUTER_COUNTS) if (!Number.isInteger(n) || n < 1 || n > 8) throw new Error(`--routers: expected router counts 1..8, got ${args.routers}`);
const WORKLOADS = args.workloads.split(',');
for (const p of POLICIES) if (!['round-robin', 'least-load', 'prefix-affinity'].includes(p)) throw new Error(`--policies: unknown policy ${p}`);
for (const w of WORKLOADS) if (!['shared', 'random', 'hot'].includes(w)) throw new Error(`--workloads: unknown workload ${w}`);

const REPLICAS = 8;
const SYSTEM_PROMPTS = 20;
const PROMPT_WORDS = 2000; // ~2k tokens in sim-engine's tokenizer (about one per word)
const MAX_TOKENS = 16;
const MODEL = 'm';
const ENGINE_ARGS = ['--engine', 'vllm', '--served-model-name', MODEL, '--prefix-cache', '--output-tokens', String(MAX_TOKENS), '--output-jitter', '0'];

/** Deterministic pseudo-random words (xorshift), so every run sends the same prompts. */
function words(seed: number, n: number): string {
  let x = (seed * 2654435761) >>> 0 || 1;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push((x % 100_000).toString(36));
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
  writeFileSync(config, `models:\n  - { name: ${MODEL}, engine: vllm, routing: { policy: ${policy} } }\nendpoints:\n${endpoints}\n`);
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
  // Sample every replica's running count while the clients run (average per replica → max ÷ mean).
  const runningSums = new Array<number>(REPLICAS).fill(0);
  let samples = 0;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      const texts = await Promise.all(engines.map(async (e) => (await fetch(`${e.url}/metrics`)).text()));
      texts.forEach((t, i) => (runningSums[i] += metricSum(t, 'vllm:num_requests_running')));
      samples++;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      for (let c = 0; c < CONVERSATIONS; c++) {
        const messages: { role: string; content: string }[] = [];
        for (let turn = 0; turn < TURNS; turn++) {
          if (workload === 'random' || turn === 0) messages.splice(0, messages.length, { role: 'system', content: systemFor(workload, client, c, turn) });
          messages.push({ role: 'user', content: `Client ${client}, conversation ${c}, question ${turn}: ${words(client * 1_000 + c * 10 + turn, 20)}` });
          const r = await ask(routers[client % routers.length].url, messages);
          ttft.push(r.ttftMs);
          tokens += r.tokens;
          messages.push({ role: 'assistant', content: r.text });
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  done = true;
  await sampler;
  const texts = await Promise.all(engines.map(async (e) => (await fetch(`${e.url}/metrics`)).text()));
  const hits = texts.reduce((s, t) => s + metricSum(t, 'vllm:prefix_cache_hits_total'), 0);
  const queries = texts.reduce((s, t) => s + metricSum(t, 'vllm:prefix_cache_queries_total'), 0);
  const averages = runningSums.map((s) => s / Math.max(1, samples));
  const mean = averages.reduce((s, v) => s + v, 0) / averages.length;
  await stopAllSpawned();
  return { requests: ttft.length, ttft, tokensPerSecond: tokens / seconds, hitRate: queries > 0 ? hits / queries : 0, maxOverMeanRunning: mean > 0 ? Math.max(...averages) / mean : 0 };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(os.tmpdir(), 'llmgw-routing-bench-'));
  const rows: string[][] = [['workload', 'policy', 'routers', 'requests', 'mean TTFT ms', 'p50 ms', 'p99 ms', 'mean vs RR', 'p99 vs RR', 'output tok/s', 'cache hit rate', 'max/mean running']];
  try {
    for (const workload of WORKLOADS) {
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
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(rows);
  if (args['no-write']) return;
  const table = [`| ${rows[0].join(' | ')} |`, `|${rows[0].map(() => '---').join('|')}|`, ...rows.slice(1).map((r) => `| ${r.join(' | ')} |`)].join('\n');
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
      `Setup: 8 sim-engine replicas (vLLM flavour, prefix cache on, default prefill 10000 tok/s and decode 50 tok/s, ${MAX_TOKENS} output tokens) behind ${several ? `${ROUTER_COUNTS.join(' or ')} llmgw-routers (each with the same static config, sharing nothing; client i sends to router i mod N)` : 'one llmgw-router'} (scrapes every 200 ms), fresh engines and routers for every run. ${CLIENTS} streaming clients in a closed loop, each ${CONVERSATIONS} conversations of ${TURNS} turns (each turn resends the conversation so far). Workloads: shared = ${SYSTEM_PROMPTS} system prompts of ~${PROMPT_WORDS} tokens; random = a fresh ~${PROMPT_WORDS}-token prompt every request; hot = half the conversations on one system prompt. TTFT = time to the first content chunk at the client. Hit rate = vllm:prefix_cache_hits_total ÷ vllm:prefix_cache_queries_total summed over the engines. max/mean running = the busiest replica's average running sequences over the mean of all replicas' averages (sampled every 50 ms). Ratios "vs RR" are round-robin's value (behind ${ROUTER_COUNTS[0]} router${ROUTER_COUNTS[0] > 1 ? 's' : ''}) ÷ this row's (above 1 = better). Round-robin here is the router's round-robin policy. Engines, routers and clients share the machine's cores, so TTFT moves between runs with whatever else runs; hit rate and max/mean running move less. Not yet measured: churn.`,
      '',
      table,
    ].join('\n'),
  );
  process.stdout.write(`wrote ${path}\n`);
}

main().catch(async (error: unknown) => {
  process.stderr.write(`routing.bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await stopAllSpawned();
  process.exit(1);
});
