// Limiter round trip: what one admission against a key's limits in Redis costs the router, next
// to a bare PING over the same connection, measured in one run against a redis-server of the
// benchmark's own: request by request (LLMGW_ROUTER_LIMIT_BATCH=0) and with the router's default
// batches of permits taken ahead of use. Open loop at a fixed rate (default 1,000 calls/s), cases interleaved over
// rounds; p50 and p99 are the median over rounds of each round's percentile. Redis CPU µs/call is
// the redis-server's CPU time (from /proc) over the calls of the case.
// Usage: node tools/run.cjs tools/bench/limits.bench.ts [--rate 1000] [--seconds 2] [--rounds 5] [--no-write]
// Load goes to 127.0.0.1 only, bounded by rate × seconds × rounds. Writes its section of
// docs/benchmarks.md unless --no-write.
import { randomUUID } from 'node:crypto';
import * as os from 'node:os';
import { parseArgs } from 'node:util';
import type { Clock, KeyLimits } from '@llmgw/domain';
import { RedisLimiter } from '@llmgw/limits';
import { startRedis } from '@llmgw/testing';
import Redis from 'ioredis';
import { cpuMicros, machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '5' },
    'no-write': { type: 'boolean', default: false },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
for (const [name, v, max] of [['rate', RATE, 20_000], ['seconds', SECONDS, 60], ['rounds', ROUNDS, 20]] as const) {
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`--${name}: expected a whole number 1..${max}, got ${v}`);
}

/** The key's limits: bench:router's, far above the load, so every admission is admitted and recorded. */
const LIMITS: KeyLimits = { requestsPerMinute: 1_000_000_000, tokensPerMinute: 1_000_000_000, concurrentRequests: 1_000_000 };
const clock: Clock = { now: () => Date.now() };

/** Starts `call` RATE times a second for SECONDS (open loop: a slow answer does not delay the next call); the latency of each, ms. */
async function openLoop(call: () => Promise<unknown>): Promise<number[]> {
  const total = RATE * SECONDS;
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const start = performance.now();
    pending.push(call().then(() => void latencies.push(performance.now() - start)));
  }
  await Promise.all(pending);
  return latencies;
}

interface Case {
  readonly name: string;
  readonly call: () => Promise<unknown>;
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1, commandTimeout: 2_000 });
  const single = new RedisLimiter({ redis: client, prefix: `bench:${process.pid}:`, leaseMs: 30_000, clock, batchMost: 0 });
  const batched = new RedisLimiter({ redis: client, prefix: `bench:${process.pid}:`, leaseMs: 30_000, clock });
  // Script calls sent to Redis, counted on the client both limiters defined them on.
  const scripted = client as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  let scriptCalls = 0;
  for (const name of ['llmgwAdmit', 'llmgwRelease']) {
    const call = scripted[name].bind(client);
    scripted[name] = (...a) => {
      scriptCalls++;
      return call(...a);
    };
  }
  const admitted = (limiter: RedisLimiter, key: string, settle: boolean) => async () => {
    const r = await limiter.admit({ key, limits: LIMITS, requestId: randomUUID(), reserveTokens: 20 });
    if (settle && r.ticket !== undefined) {
      const ticket = r.ticket;
      setTimeout(() => void limiter.settle(ticket, 4)?.catch(() => undefined), 1);
    }
  };
  const cases: Case[] = [
    { name: 'PING (bare round trip)', call: () => client.ping() },
    { name: 'admission (rpm, tpm, concurrency), request by request', call: admitted(single, 'single', false) },
    { name: 'admission, settled 1 ms later, request by request', call: admitted(single, 'settled', true) },
    { name: 'admission, settled 1 ms later, with batches (default)', call: admitted(batched, 'batched', true) },
  ];
  const results = new Map<string, { p50: number[]; p99: number[]; cpu: number[]; calls: number[] }>(cases.map((c) => [c.name, { p50: [], p99: [], cpu: [], calls: [] }]));
  try {
    await client.ping();
    for (const c of cases) await openLoop(c.call); // warm-up: connection, scripts loaded, structures sized
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the order each round so a disturbance does not always fall on the same case.
      for (let k = 0; k < cases.length; k++) {
        const c = cases[(k + round) % cases.length];
        const before = cpuMicros([redis.process.pid]);
        const callsBefore = scriptCalls;
        const latencies = await openLoop(c.call);
        await new Promise((r) => setTimeout(r, 20)); // the last settles' write
        const after = cpuMicros([redis.process.pid]);
        const r = results.get(c.name)!;
        r.calls.push((scriptCalls - callsBefore) / latencies.length);
        r.p50.push(percentile(latencies, 50));
        r.p99.push(percentile(latencies, 99));
        if (before !== undefined && after !== undefined) r.cpu.push((after - before) / latencies.length);
        process.stdout.write(`round ${round + 1}: ${c.name} p50 ${percentile(latencies, 50).toFixed(3)} ms p99 ${percentile(latencies, 99).toFixed(3)} ms\n`);
      }
    }
  } finally {
    client.disconnect();
    await redis.stop();
  }
  const median = (xs: readonly number[]): number => percentile(xs, 50);
  const ping = median(results.get(cases[0].name)!.p50);
  const rows = [['call', 'p50 ms', 'p99 ms', 'p50 vs PING', 'Redis CPU µs/call', 'scripts sent/call']];
  for (const c of cases) {
    const r = results.get(c.name)!;
    rows.push([
      c.name,
      median(r.p50).toFixed(3),
      median(r.p99).toFixed(3),
      (median(r.p50) / ping).toFixed(2),
      r.cpu.length > 0 ? median(r.cpu).toFixed(0) : '-',
      c === cases[0] ? '-' : median(r.calls).toFixed(3),
    ]);
  }
  printTable(rows);
  if (args['no-write']) return;
  const path = writeSection(
    'limits',
    'Key limits: one admission against Redis, request by request and with batches',
    [
      'Command: `npm run bench:limits` (`node tools/run.cjs tools/bench/limits.bench.ts`).',
      '',
      `Machine: ${machineLine(os.cpus(), os.totalmem())}.`,
      '',
      `One ioredis client in the benchmark process and a redis-server of its own on 127.0.0.1. Open loop at ${RATE} calls/s, ${ROUNDS} rounds × ${SECONDS} s per case after a warm-up round, cases interleaved and rotated; p50 and p99 are the median over rounds of each round's percentile. The admission is libs/limits' RedisLimiter with bench:router's key (requests, tokens per minute and concurrency, all far above the load, so every call is admitted and recorded in the sliding windows); "settled 1 ms later" gives the concurrency lease back as a finished request does, the settle riding with the next admission's write. Redis CPU µs/call = the redis-server's CPU time over the case's calls. "request by request" is a router with LLMGW_ROUTER_LIMIT_BATCH=0; "with batches" is the default, where a busy key spends batches of up to 64 permits taken from Redis ahead of use (libs/limits README); scripts sent/call counts the admit and release scripts that went to Redis per admission.`,
      '',
      markdownTable(rows),
    ].join('\n'),
  );
  process.stdout.write(`wrote ${path}\n`);
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
