// The pieces the router benchmarks share: an engine that answers at once, and llmgw-router
// started from a static config (optionally with an API key, its limits, and a tree of its own).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runTsEntry, spawnProcess, type SpawnedProcess } from '@llmgw/testing';

/** The instant engine: answers every POST with one small chat completion and GET /metrics with vLLM gauges. */
const INSTANT_ENGINE = `
const http = require('node:http');
const body = Buffer.from(JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion', created: 0, model: 'bench',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));
const metrics = '# TYPE vllm:num_requests_running gauge\\nvllm:num_requests_running{model_name="bench"} 0\\n# TYPE vllm:num_requests_waiting gauge\\nvllm:num_requests_waiting{model_name="bench"} 0\\n';
const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/metrics') { res.writeHead(200, { 'content-type': 'text/plain' }); res.end(metrics); return; }
  req.on('data', () => {});
  req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }); res.end(body); });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write('engine listening on http://127.0.0.1:' + server.address().port + '\\n'));
process.on('SIGTERM', () => process.exit(0));
`;

export const INSTANT_ENGINE_WHAT = 'a minimal instant engine (one Node process, a fixed 238-byte chat completion)';

/** Starts the instant engine (Node, no dependencies). */
export async function startInstantEngine(): Promise<{ proc: SpawnedProcess; url: string }> {
  const proc = await spawnProcess({
    command: process.execPath,
    args: ['-e', INSTANT_ENGINE],
    name: 'instant-engine',
    readyWhen: { stdoutMatch: /engine listening on (http:\/\/127\.0\.0\.1:\d+)/ },
  });
  return { proc, url: proc.readyMatch?.[1] ?? '' };
}

/** The API key the keyed routers accept. */
export const BENCH_KEY = 'llmgw-bench-key-0123456789abcdef';

/** Limits far above any benchmark's load: every request is admitted, so what is measured is the check. */
export const FAR_LIMITS = '{ requestsPerMinute: 1000000000, tokensPerMinute: 1000000000, concurrentRequests: 1000000 }';

export interface BenchRouterOptions {
  /** Scratch folder for its config (one file per name). */
  readonly dir: string;
  readonly engineUrl: string;
  /** Unique per router in the folder. */
  readonly name: string;
  /** The model's routing in YAML flow style (`, routing: { policy: x }`), or '' for the default. */
  readonly routing?: string;
  /** Accept BENCH_KEY (auth on), with these limits (YAML flow style) or none. */
  readonly key?: { readonly limits?: string };
  /** Keep limits in this Redis (else in memory). */
  readonly redisUrl?: string;
  /** A checkout of another revision to run the router from (its own tools/run.cjs and tsconfig paths). */
  readonly root?: string;
}

/** Starts llmgw-router on a free port with one model `bench` served by the engine at `engineUrl`. */
export async function startBenchRouter(o: BenchRouterOptions): Promise<{ url: string; pid: number }> {
  const config = join(o.dir, `${o.name}.yaml`);
  const keysFile = join(o.dir, `${o.name}-keys.yaml`);
  if (o.key !== undefined) writeFileSync(keysFile, `keys:\n  - { name: bench-${process.pid}, key: ${BENCH_KEY}${o.key.limits !== undefined ? `, limits: ${o.key.limits}` : ''} }\n`);
  writeFileSync(config, `models:\n  - { name: bench, engine: vllm${o.routing ?? ''} }\nendpoints:\n  - { id: engine, model: bench, url: "${o.engineUrl}" }\n`);
  // Nothing of this process's settings leaks in: not its LLMGW_*, nor its TypeScript loader's project (another root has its own).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LLMGW_') && k !== 'SWC_NODE_PROJECT'));
  const entry = o.root === undefined ? runTsEntry('apps/router/src/main.ts') : { command: process.execPath, args: [join(o.root, 'tools', 'run.cjs'), join(o.root, 'apps/router/src/main.ts')] };
  const proc = await spawnProcess({
    ...entry,
    name: `llmgw-router ${o.name}`,
    cleanEnv: true,
    env: {
      ...env,
      LLMGW_ROUTER_PORT: '0',
      LLMGW_DATA_DIR: o.dir,
      LLMGW_ROUTER_CONFIG_FILE: config,
      LLMGW_LOG_LEVEL: 'info',
      ...(o.key !== undefined && { LLMGW_ROUTER_API_KEYS_FILE: keysFile }),
      ...(o.redisUrl !== undefined && { LLMGW_REDIS_URL: o.redisUrl }),
    },
    readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 60_000,
  });
  return { url: proc.readyMatch?.[1] ?? '', pid: proc.pid };
}
