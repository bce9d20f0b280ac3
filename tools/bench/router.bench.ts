// Router benchmark: the same load sent straight to an engine that answers instantly, through
// llmgw-router, and through nginx proxy_pass (Debian nginx), in one run. Reports p50/p99
// latency at a fixed rate (open loop, default 1,000 req/s) and the added latency of each proxy
// over the direct path, then the maximum req/s of each (wrk, fixed connections), as ratios.
// Targets: router adds p50 ≤ 0.3 ms and p99 ≤ 2 ms, and reaches ≥ half of nginx's req/s.
// Usage: node tools/run.cjs tools/bench/router.bench.ts [--rate 1000] [--seconds 3] [--rounds 3]
//        [--connections 64] [--upstream node|sim] [--policy default|least-load|prefix-affinity|round-robin]
//        [--body-bytes 80] [--limits] [--no-write]
// --limits adds a router whose static key has limits in Redis (a redis-server of the benchmark's
// own, so its CPU time is counted with that router's) and one whose key has none (the key is
// authenticated, nothing is limited), and sends the key on every path: limits on and off in one
// run, to show what the limit check adds.
// --policy sets the model's routing policy (default: none set, the router's default for chat, prefix-affinity);
// --body-bytes pads the chat message so the body has that many bytes (e.g. 102400 for a 100 KB chat body).
// Needs nginx and wrk on PATH (apt-get install -y nginx wrk). Load goes to 127.0.0.1 only and
// every phase is bounded in count and time. Writes its section of docs/benchmarks.md unless --no-write.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import * as os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, runTsEntry, spawnProcess, startRedis, stopAllSpawned, type SpawnedProcess } from '@llmgw/testing';
import { BENCH_KEY, FAR_LIMITS, INSTANT_ENGINE_WHAT, startBenchRouter, startInstantEngine } from './bench-router-setup';
import { cpuMicros, machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '64' },
    upstream: { type: 'string', default: 'node' },
    policy: { type: 'string', default: 'default' },
    'body-bytes': { type: 'string', default: '80' },
    'no-write': { type: 'boolean', default: false },
    limits: { type: 'boolean', default: false },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);
const CONNECTIONS = Number(args.connections);
const WARMUP_MS = 500;
const SMALL_BODY = '{"model":"bench","messages":[{"role":"user","content":"Say hi"}],"max_tokens":1}';
const BODY_BYTES = Number(args['body-bytes']);
if (!Number.isInteger(BODY_BYTES) || BODY_BYTES < SMALL_BODY.length || BODY_BYTES > 16 * 1024 * 1024) {
  throw new Error(`--body-bytes: expected a whole number ${SMALL_BODY.length}..${16 * 1024 * 1024}, got ${args['body-bytes']}`);
}
/** The request body: the 80-byte chat request, its message padded with words to --body-bytes. */
const BODY = Buffer.from(SMALL_BODY.replace('Say hi', `Say hi${' lorem'.repeat(Math.ceil((BODY_BYTES - SMALL_BODY.length) / 6)).slice(0, BODY_BYTES - SMALL_BODY.length)}`));
const PATH = '/v1/chat/completions';

for (const [name, v, max] of [['rate', RATE, 20_000], ['seconds', SECONDS, 60], ['rounds', ROUNDS, 10], ['connections', CONNECTIONS, 1_024]] as const) {
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`--${name}: expected a whole number 1..${max}, got ${v}`);
}
if (args.upstream !== 'node' && args.upstream !== 'sim') throw new Error(`--upstream: expected node or sim, got ${args.upstream}`);
const POLICIES = ['default', 'least-load', 'prefix-affinity', 'round-robin'];
if (!POLICIES.includes(args.policy)) throw new Error(`--policy: expected one of ${POLICIES.join(', ')}, got ${args.policy}`);
/** The model's routing in the router's config: none (the router's default, prefix-affinity for chat) or the policy asked for. */
const ROUTING = args.policy === 'default' ? '' : `, routing: { policy: ${args.policy} }`;

/** A proxy on Node's own http server and client: read the body, send it over a keep-alive agent, pipe the answer back. No routing, no metrics. */
const BARE_NODE_PROXY = `
const http = require('node:http');
const [host, port] = process.argv[1].split(':');
const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 1024 });
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const up = http.request({ agent, host, port, method: req.method, path: req.url, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.destroy());
    up.end(body);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write('proxy listening on http://127.0.0.1:' + server.address().port + '\\n'));
process.on('SIGTERM', () => process.exit(0));
`;

interface Target {
  readonly name: string;
  readonly url: string;
  /** Processes whose CPU time is this path's own cost (their children included); none for the direct path. */
  readonly pids: readonly number[];
}

async function startEngine(): Promise<{ proc: SpawnedProcess; url: string; what: string }> {
  if (args.upstream === 'sim') {
    const proc = await spawnProcess({
      ...runTsEntry('tools/sim-engine/src/main.ts', ['--engine', 'vllm', '--served-model-name', 'bench', '--port', '0', '--decode-tps', '1000000', '--prefill-tps', '100000000', '--output-tokens', '1', '--output-jitter', '0', '--max-running', '1024']),
      name: 'sim-engine',
      readyWhen: { stdoutMatch: /sim-engine ready/ },
      deadlineMs: 60_000,
    });
    const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(proc.stdout)?.[1] ?? '';
    return { proc, url, what: 'sim-engine (vLLM flavour, 1 output token, decode 1e6 tok/s)' };
  }
  const { proc, url } = await startInstantEngine();
  return { proc, url, what: INSTANT_ENGINE_WHAT };
}

/** The key every request carries when --limits is on; the keyed routers check it, the others pass it on unread. */
const AUTH: Record<string, string> = args.limits ? { authorization: `Bearer ${BENCH_KEY}` } : {};

async function startBareNodeProxy(engineUrl: string): Promise<{ url: string; pid: number }> {
  const proc = await spawnProcess({
    command: process.execPath,
    args: ['-e', BARE_NODE_PROXY, new URL(engineUrl).host],
    name: 'bare-node-proxy',
    readyWhen: { stdoutMatch: /proxy listening on (http:\/\/127\.0\.0\.1:\d+)/ },
  });
  return { url: proc.readyMatch?.[1] ?? '', pid: proc.pid };
}

async function startNginx(dir: string, engineUrl: string): Promise<{ url: string; pid: number }> {
  const port = await freePort();
  const engine = new URL(engineUrl);
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/client-body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream engine { server ${engine.host}; keepalive 128; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const proc = await spawnProcess({
    command: 'nginx',
    args: ['-p', dir, '-c', conf],
    name: 'nginx',
    readyWhen: { http: { url: `http://127.0.0.1:${port}/metrics` } },
  });
  return { url: `http://127.0.0.1:${port}`, pid: proc.pid };
}

/** Sends `rate` req/s for `ms` (open loop: sends on schedule, whatever is outstanding); latencies of 200s in ms. */
function openLoop(base: string, rate: number, ms: number): Promise<{ latencies: number[]; errors: number }> {
  const url = new URL(PATH, base);
  const agent = new Agent({ keepAlive: true, maxSockets: 512 });
  const total = Math.round((rate * ms) / 1000);
  const latencies: number[] = [];
  let errors = 0;
  let sent = 0;
  let settled = 0;
  return new Promise((resolve) => {
    const start = performance.now();
    const done = (): void => {
      if (++settled === total) {
        agent.destroy();
        resolve({ latencies, errors });
      }
    };
    const fire = (): void => {
      const t0 = performance.now();
      const req = request(
        { agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': BODY.length, ...AUTH } },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) latencies.push(performance.now() - t0);
            else errors++;
            done();
          });
        },
      );
      req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
      req.on('error', () => {
        errors++;
        done();
      });
      req.end(BODY);
    };
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      while (sent < due) {
        sent++;
        fire();
      }
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
}

/** wrk with one thread and `CONNECTIONS` connections for `seconds`: requests per second and count (non-2xx counted as errors). */
function maxThroughput(dir: string, base: string, seconds: number): Promise<{ rps: number; requests: number; errors: number }> {
  const script = join(dir, 'post.lua');
  const auth = AUTH.authorization !== undefined ? `wrk.headers["Authorization"] = "${AUTH.authorization}"\n` : '';
  writeFileSync(script, `wrk.method = "POST"\nwrk.body = '${BODY.toString()}'\nwrk.headers["Content-Type"] = "application/json"\n${auth}`);
  return new Promise((resolve, reject) => {
    execFile('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '-s', script, `${base}${PATH}`], { timeout: (seconds + 30) * 1000 }, (error, stdout) => {
      if (error) return reject(new Error(`wrk failed: ${error.message}`));
      const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
      const requests = Number(/(\d+) requests in/.exec(stdout)?.[1]);
      const errors = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? 0) + Number(/Socket errors:.*?(\d+)/.exec(stdout)?.[1] ?? 0);
      resolve({ rps, requests, errors });
    });
  });
}

function which(cmd: string): Promise<boolean> {
  return new Promise((resolve) => execFile('sh', ['-c', `command -v ${cmd}`], (error) => resolve(!error)));
}

/** yes/no against a ceiling; a negative difference is noise (the direct path measured slower), not a result. */
const verdict = (v: number, max: number): string => (v < 0 ? 'noise' : v <= max ? 'yes' : 'no');
/** Lowest and highest per-round ratio a/b (rounds pair up by index). */
function ratioRange(a: readonly number[], b: readonly number[]): string {
  const ratios = a.map((x, i) => x / b[i]).filter(Number.isFinite);
  return ratios.length === 0 ? '-' : `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`;
}
const ms = (v: number): string => (Number.isFinite(v) ? v.toFixed(3) : '-');
const median = (xs: readonly number[]): number => percentile(xs, 50);

async function main(): Promise<void> {
  for (const tool of ['nginx', 'wrk']) {
    if (!(await which(tool))) throw new Error(`${tool} is needed: apt-get install -y nginx wrk`);
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'llmgw-bench-router-'));
  const loadBefore = os.loadavg()[0];
  try {
    const engine = await startEngine();
    const router = await startBenchRouter({ dir, engineUrl: engine.url, name: 'router', routing: ROUTING });
    const nginx = await startNginx(dir, engine.url);
    const bare = await startBareNodeProxy(engine.url);
    const targets: Target[] = [
      { name: 'direct', url: engine.url, pids: [] },
      { name: 'llmgw-router', url: router.url, pids: [router.pid] },
      { name: 'nginx proxy_pass', url: nginx.url, pids: [nginx.pid] },
      { name: 'bare Node http proxy', url: bare.url, pids: [bare.pid] },
    ];
    if (args.limits) {
      const redis = await startRedis();
      const limited = await startBenchRouter({ dir, engineUrl: engine.url, name: 'router-limits', routing: ROUTING, key: { limits: FAR_LIMITS }, redisUrl: redis.url });
      const keyOnly = await startBenchRouter({ dir, engineUrl: engine.url, name: 'router-key', routing: ROUTING, key: {} });
      // The limit check's cost is the router's and its Redis's: both are counted.
      targets.splice(
        2,
        0,
        { name: 'llmgw-router, key without limits', url: keyOnly.url, pids: [keyOnly.pid] },
        { name: 'llmgw-router, key limits in Redis', url: limited.url, pids: [limited.pid, redis.process.pid] },
      );
    }
    /** Per round and path: p50 and p99 of that round's samples (the report takes the median over rounds). */
    const roundStats = new Map<string, { p50: number[]; p99: number[] }>(targets.map((t) => [t.name, { p50: [], p99: [] }]));
    const errors = new Map<string, number>(targets.map((t) => [t.name, 0]));
    const rps = new Map<string, number[]>(targets.map((t) => [t.name, []]));
    const cpu = new Map<string, { micros: number; requests: number }>(targets.map((t) => [t.name, { micros: 0, requests: 0 }]));

    // 1. Latency at a fixed rate, targets interleaved and rotated per round so drift hits all alike.
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < targets.length; i++) {
        const t = targets[(i + round) % targets.length];
        await openLoop(t.url, RATE, WARMUP_MS);
        const r = await openLoop(t.url, RATE, SECONDS * 1000);
        roundStats.get(t.name)?.p50.push(percentile(r.latencies, 50));
        roundStats.get(t.name)?.p99.push(percentile(r.latencies, 99));
        errors.set(t.name, (errors.get(t.name) ?? 0) + r.errors);
        process.stderr.write(`round ${round + 1}: ${t.name} p50 ${ms(percentile(r.latencies, 50))} ms p99 ${ms(percentile(r.latencies, 99))} ms\n`);
      }
    }
    // 2. Maximum throughput, same interleaving.
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < targets.length; i++) {
        const t = targets[(i + round) % targets.length];
        const before = cpuMicros(t.pids);
        const r = await maxThroughput(dir, t.url, SECONDS);
        const after = cpuMicros(t.pids);
        const c = cpu.get(t.name);
        if (c && before !== undefined && after !== undefined) {
          c.micros += after - before;
          c.requests += r.requests;
        }
        rps.get(t.name)?.push(r.rps);
        errors.set(t.name, (errors.get(t.name) ?? 0) + r.errors);
        process.stderr.write(`round ${round + 1}: ${t.name} ${r.rps.toFixed(0)} req/s\n`);
      }
    }
    const loadAfter = os.loadavg()[0];

    const p = (name: string, q: 50 | 99): number => median(roundStats.get(name)?.[q === 50 ? 'p50' : 'p99'] ?? []);
    const direct = { p50: p('direct', 50), p99: p('direct', 99) };
    const cpuPerRequest = (name: string): number => {
      const c = cpu.get(name);
      return c && c.requests > 0 ? c.micros / c.requests : NaN;
    };
    const rows: string[][] = [['path', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'max req/s', 'req/s vs direct', 'proxy CPU µs/req', 'errors']];
    for (const t of targets) {
      const isDirect = t.name === 'direct';
      rows.push([
        t.name,
        ms(p(t.name, 50)),
        ms(p(t.name, 99)),
        isDirect ? '-' : ms(p(t.name, 50) - direct.p50),
        isDirect ? '-' : ms(p(t.name, 99) - direct.p99),
        median(rps.get(t.name) ?? []).toFixed(0),
        (median(rps.get(t.name) ?? []) / median(rps.get('direct') ?? [])).toFixed(2),
        isDirect ? '-' : Number.isFinite(cpuPerRequest(t.name)) ? cpuPerRequest(t.name).toFixed(0) : '-',
        String(errors.get(t.name) ?? 0),
      ]);
    }
    const routerRps = median(rps.get('llmgw-router') ?? []);
    const nginxRps = median(rps.get('nginx proxy_pass') ?? []);
    const addedP50 = p('llmgw-router', 50) - direct.p50;
    const addedP99 = p('llmgw-router', 99) - direct.p99;
    const summary = [
      ['measure', 'llmgw-router', 'target', 'met'],
      ['added p50 latency (ms)', ms(addedP50), '≤ 0.300', verdict(addedP50, 0.3)],
      ['added p99 latency (ms)', ms(addedP99), '≤ 2.000', verdict(addedP99, 2)],
      ['max req/s vs nginx', (routerRps / nginxRps).toFixed(2), '≥ 0.50', routerRps / nginxRps >= 0.5 ? 'yes' : 'no'],
      ['  same, lowest–highest round', ratioRange(rps.get('llmgw-router') ?? [], rps.get('nginx proxy_pass') ?? []), '-', '-'],
      ['proxy CPU per request vs nginx', (cpuPerRequest('llmgw-router') / cpuPerRequest('nginx proxy_pass')).toFixed(2), '-', '-'],
      ['proxy CPU per request vs bare Node http proxy', (cpuPerRequest('llmgw-router') / cpuPerRequest('bare Node http proxy')).toFixed(2), '-', '-'],
    ];
    if (args.limits) {
      const withLimits = p('llmgw-router, key limits in Redis', 50) - direct.p50;
      const withKey = p('llmgw-router, key without limits', 50) - direct.p50;
      summary.push(['added p50 latency with key limits in Redis (ms)', ms(withLimits), '≤ 0.500', verdict(withLimits, 0.5)]);
      summary.push(['added p50 latency with the key, limits off (ms)', ms(withKey), '-', '-']);
      summary.push(['  limits on vs off: the limit check (ms)', ms(withLimits - withKey), '-', '-']);
      summary.push(['  limits on vs the router without keys (ms)', ms(withLimits - addedP50), '-', '-']);
      summary.push(['  router + Redis CPU per request, limits on vs off', (cpuPerRequest('llmgw-router, key limits in Redis') / cpuPerRequest('llmgw-router, key without limits')).toFixed(2), '-', '-']);
    }
    printTable(rows);
    printTable(summary);

    if (!args['no-write']) {
      const body = [
        'Command: `npm run bench:router` (`node tools/run.cjs tools/bench/router.bench.ts`).',
        '',
        `Machine: ${machineLine(os.cpus(), os.totalmem())}; 1-minute load average ${loadBefore.toFixed(1)} before and ${loadAfter.toFixed(1)} after the run (the machine may be shared: a higher load means other work ran alongside).`,
        '',
        `Engine: ${engine.what}. The same POST ${PATH} (${BODY.length}-byte body) goes straight to it, through llmgw-router (one process, static config, default settings: auth off, scraping on, routing policy ${args.policy === 'default' ? 'the default for chat (prefix-affinity)' : args.policy}; it reads API requests with its own HTTP/1.1 front end and keeps pooled keep-alive connections to engines), through nginx 1.22 \`proxy_pass\` (\`worker_processes 1\`, upstream keepalive, proxy_buffering off), and — for scale — through a bare 20-line proxy on Node's http server and client (no routing, no metrics: what Node's own HTTP machinery costs). Latency: open loop at ${RATE} req/s, ${ROUNDS} rounds × ${SECONDS} s per path after a ${WARMUP_MS} ms warm-up, paths interleaved and rotated; p50 and p99 are the median over rounds of each round's percentile (one disturbed round does not decide); the load generator is the benchmark process. Maximum: \`wrk -t1 -c${CONNECTIONS} -d${SECONDS}s\`, median of ${ROUNDS} rounds. Added latency = the path's percentile minus the direct path's. Proxy CPU µs/req = CPU time (user + system, from /proc) of the proxy's processes during the wrk runs divided by the requests served — the cost that decides throughput on a machine of your own, less sensitive to other load than req/s.`,
        '',
        markdownTable(rows),
        '',
        markdownTable(summary),
      ].join('\n');
      process.stdout.write(`wrote ${writeSection('router', 'Router: added latency and throughput against nginx', body)}\n`);
    }
  } finally {
    await stopAllSpawned();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch(async (error: unknown) => {
  process.stderr.write(`router.bench: ${error instanceof Error ? error.message : String(error)}\n`);
  await stopAllSpawned();
  process.exit(1);
});
