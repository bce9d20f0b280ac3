// What each stage of the router's hot path costs, one request at a time. The same chat request
// goes straight to an instant engine and through llmgw-router without keys, with an API key and
// no limits, with the key's limits in Redis, and with them in memory (no Redis), interleaved
// request by request (each round rotates the order), so drift on a shared machine hits every
// path alike; differences of a few hundredths of a millisecond show. bench:router's open loop
// measures latency under a rate and throughput; this one isolates what a stage adds.
// Usage: node tools/run.cjs tools/bench/router-overhead.bench.ts [--requests 3000] [--rounds 4]
//        [--against <git ref>] [--no-write]
// --against also runs every router from a checkout of that revision (a git worktree with this
// checkout's node_modules), side by side with this tree's: a change measured against its base in
// one run. Load goes to 127.0.0.1 only, one request at a time, bounded in count.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot, startRedis, stopAllSpawned } from '@llmgw/testing';
import { BENCH_KEY, FAR_LIMITS, INSTANT_ENGINE_WHAT, startBenchRouter, startInstantEngine, type BenchRouterOptions } from './bench-router-setup';
import { machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '4' },
    against: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
  },
});
const REQUESTS = Number(args.requests);
const ROUNDS = Number(args.rounds);
for (const [name, v, max] of [['requests', REQUESTS, 100_000], ['rounds', ROUNDS, 20]] as const) {
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`--${name}: expected a whole number 1..${max}, got ${v}`);
}
const WARMUP = 500;
const BODY = '{"model":"bench","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1}';
/** Every path gets the same bytes, the key included; the routers without keys pass it on unread. */
const REQUEST = Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\nauthorization: Bearer ${BENCH_KEY}\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY}`);

interface Path {
  readonly name: string;
  readonly port: number;
}

/** One keep-alive connection; `send` resolves with the milliseconds until the whole response is in. */
class Connection {
  private buf: Buffer = Buffer.alloc(0);
  private waiting: { t0: bigint; resolve: (ms: number) => void; reject: (e: Error) => void } | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) => this.fail(e));
    socket.on('close', () => this.fail(new Error('connection closed')));
  }

  static open(port: number): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => resolve(new Connection(socket)));
      socket.setNoDelay(true);
      socket.once('error', reject);
    });
  }

  send(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.waiting = { t0: process.hrtime.bigint(), resolve, reject };
      this.socket.write(REQUEST);
    });
  }

  close(): void {
    this.waiting = undefined;
    this.socket.destroy();
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0 || this.waiting === undefined) return;
    const head = this.buf.subarray(0, end).toString('latin1');
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!head.startsWith('HTTP/1.1 200 ') || length === null) {
      this.fail(new Error(`unexpected answer: ${head.split('\r\n')[0]}`));
      return;
    }
    const total = end + 4 + Number(length[1]);
    if (this.buf.length < total) return;
    const w = this.waiting;
    this.waiting = undefined;
    this.buf = this.buf.subarray(total);
    w.resolve(Number(process.hrtime.bigint() - w.t0) / 1e6);
  }

  private fail(e: Error): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.reject(e);
  }
}

/** A worktree of `ref` beside this checkout, sharing its node_modules; removed by the returned function. */
function checkout(ref: string): { root: string; remove: () => void } {
  const root = mkdtempSync(join(os.tmpdir(), 'llmgw-bench-against-'));
  rmSync(root, { recursive: true });
  execFileSync('git', ['-C', repoRoot(), 'worktree', 'add', '--detach', '--quiet', root, ref], { stdio: 'inherit' });
  symlinkSync(join(repoRoot(), 'node_modules'), join(root, 'node_modules'));
  const remove = (): void => {
    execFileSync('git', ['-C', repoRoot(), 'worktree', 'remove', '--force', root]);
  };
  return { root, remove };
}

const ms = (v: number): string => (Number.isFinite(v) ? v.toFixed(3) : '-');
const median = (xs: readonly number[]): number => percentile(xs, 50);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(os.tmpdir(), 'llmgw-bench-overhead-'));
  const base = args.against !== undefined ? checkout(args.against) : undefined;
  const baseRev = args.against !== undefined ? execFileSync('git', ['-C', repoRoot(), 'rev-parse', '--short', args.against], { encoding: 'utf8' }).trim() : undefined;
  const thisRev = execFileSync('git', ['-C', repoRoot(), 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['-C', repoRoot(), 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
  const connections: Connection[] = [];
  try {
    const redis = await startRedis();
    const engine = await startInstantEngine();
    const variants: { name: string; options: Omit<BenchRouterOptions, 'dir' | 'engineUrl' | 'name' | 'root'> }[] = [
      { name: 'llmgw-router', options: {} },
      { name: 'with the key, no limits', options: { key: {} } },
      { name: 'key limits in Redis', options: { key: { limits: FAR_LIMITS }, redisUrl: redis.url } },
      { name: 'key limits in memory', options: { key: { limits: FAR_LIMITS } } },
    ];
    const trees: { label: string; root?: string }[] = [{ label: '' }, ...(base !== undefined ? [{ label: ` @ ${baseRev}`, root: base.root }] : [])];
    const paths: Path[] = [{ name: 'direct', port: Number(new URL(engine.url).port) }];
    for (const tree of trees) {
      for (const [i, v] of variants.entries()) {
        const r = await startBenchRouter({ dir, engineUrl: engine.url, name: `r${i}${tree.root !== undefined ? 'b' : ''}`, ...v.options, ...(tree.root !== undefined && { root: tree.root }) });
        paths.push({ name: `${v.name}${tree.label}`, port: Number(new URL(r.url).port) });
      }
    }
    for (const p of paths) connections.push(await Connection.open(p.port));
    for (let i = 0; i < WARMUP; i++) for (const c of connections) await c.send();

    const loadBefore = os.loadavg()[0];
    const rounds = paths.map(() => ({ p50: [] as number[], p90: [] as number[] }));
    for (let round = 0; round < ROUNDS; round++) {
      const samples = paths.map(() => [] as number[]);
      for (let i = 0; i < REQUESTS; i++) {
        for (let j = 0; j < paths.length; j++) {
          const k = (i + j + round) % paths.length;
          samples[k].push(await connections[k].send());
        }
      }
      samples.forEach((s, k) => {
        rounds[k].p50.push(percentile(s, 50));
        rounds[k].p90.push(percentile(s, 90));
      });
      process.stderr.write(`round ${round + 1}: ${paths.map((p, k) => `${p.name} ${ms(percentile(samples[k], 50))}`).join(' | ')}\n`);
    }
    const loadAfter = os.loadavg()[0];

    const p50 = (k: number): number => median(rounds[k].p50);
    const find = (name: string): number => paths.findIndex((p) => p.name === name);
    const rows: string[][] = [['path', 'p50 ms', 'p90 ms', 'added p50 ms']];
    paths.forEach((p, k) => rows.push([p.name, ms(p50(k)), ms(median(rounds[k].p90)), k === 0 ? '-' : ms(p50(k) - p50(0))]));
    const summary: string[][] = [['stage (p50 difference)', 'ms']];
    for (const tree of trees) {
      const at = (n: string): number => p50(find(`${n}${tree.label}`));
      summary.push([`the key (authentication, usage read back)${tree.label}`, ms(at('with the key, no limits') - at('llmgw-router'))]);
      summary.push([`limits in Redis over the key alone${tree.label}`, ms(at('key limits in Redis') - at('with the key, no limits'))]);
      summary.push([`limits in memory over the key alone${tree.label}`, ms(at('key limits in memory') - at('with the key, no limits'))]);
    }
    if (base !== undefined) {
      for (const v of variants) summary.push([`${v.name}: this tree − ${baseRev}`, ms(p50(find(v.name)) - p50(find(`${v.name} @ ${baseRev}`)))]);
    }
    printTable(rows);
    printTable(summary);

    if (!args['no-write']) {
      const body = [
        `Command: \`npm run bench:router-overhead${args.against !== undefined ? ` -- --against ${args.against}` : ''}\` (\`node tools/run.cjs tools/bench/router-overhead.bench.ts\`), at ${thisRev}${dirty ? ' with uncommitted changes' : ''}.`,
        '',
        `Machine: ${machineLine(os.cpus(), os.totalmem())}; 1-minute load average ${loadBefore.toFixed(1)} before and ${loadAfter.toFixed(1)} after the measured rounds.`,
        '',
        `Engine: ${INSTANT_ENGINE_WHAT}. One request at a time (${BODY.length}-byte chat body, every path sent the same API key), ${REQUESTS} requests per path per round, ${ROUNDS} rounds after ${WARMUP} per path of warm-up; the paths take turns request by request (the order rotates), each over one keep-alive connection; p50 and p90 are the median over rounds. Routers: static config, default settings; limits far above the load (every request admitted). For CPU per request and throughput, see bench:router.`,
        '',
        markdownTable(rows),
        '',
        markdownTable(summary),
      ].join('\n');
      process.stdout.write(`wrote ${writeSection('router-overhead', 'Router: what each stage adds, one request at a time', body)}\n`);
    }
  } finally {
    for (const c of connections) c.close();
    await stopAllSpawned();
    rmSync(dir, { recursive: true, force: true });
    if (base !== undefined && existsSync(base.root)) base.remove();
  }
}

main().catch(async (error: unknown) => {
  process.stderr.write(`router-overhead.bench: ${error instanceof Error ? error.message : String(error)}\n`);
  await stopAllSpawned();
  process.exit(1);
});
