import type { EngineKind } from '@llmgw/domain';
import { validateSchedulerConfig } from './batch.scheduler';

/** Everything the simulator needs to start, validated. Times in seconds, rates in tokens/s. */
export interface SimConfig {
  engine: EngineKind;
  host: string;
  /** 0: any free port (the bound one is printed). */
  port: number;
  /** Names clients may put in `model`; the first is the primary (metrics label, /v1/models root). */
  servedModelNames: string[];
  /** Model path as given on the command line (vLLM positional / llama.cpp -m), if any. */
  modelPath?: string;
  maxRunning: number;
  maxBatchedTokens: number;
  prefillTps: number;
  decodeTps: number;
  batchSlowdown: number;
  kvCapacityTokens: number;
  blockSize: number;
  /** Longest prompt + completion one request may ask for. */
  maxModelLen: number;
  prefixCaching: boolean;
  seed: number;
  /** Mean natural completion length in tokens when the request does not cap it lower. */
  outputTokens: number;
  /** Natural lengths are uniform in outputTokens * [1 - jitter, 1 + jitter]. */
  outputJitter: number;
  embeddingDim: number;
  /** Modelled loading time before the engine is ready (load-seconds + slow-start). */
  loadSeconds: number;
  /** llama.cpp: /metrics only with --metrics (like llama-server). vLLM always serves it. */
  metrics: boolean;
  /** llama.cpp: expose llamacpp:kv_cache_usage_ratio / kv_cache_tokens. */
  kvMetric: boolean;
  /** llama.cpp: serve GET /slots (on by default, like llama-server; off with --no-slots). */
  slots: boolean;
  /** vLLM: name the KV gauge vllm:gpu_cache_usage_perc (pre-0.9) instead of vllm:kv_cache_usage_perc. */
  legacyKvMetric: boolean;
  errorRate: number;
  crashAfter?: number;
  hang: boolean;
  failMidStreamAfter?: number;
  /** Streamed responses send their head (and, for chat, the role-only chunk), then the connection is closed before the first token. */
  failBeforeContent: boolean;
  apiKey?: string;
}

/** The outcome of parsing argv: a config, a request for help, or every problem found. */
export type ParseResult = { kind: 'config'; config: SimConfig } | { kind: 'help' } | { kind: 'error'; problems: string[] };

type ValueKind = 'int' | 'number' | 'string';
type Key = keyof RawOptions;

interface RawOptions {
  profile?: string;
  engine?: string;
  host?: string;
  port?: number;
  servedModelNames?: string[];
  alias?: string;
  model?: string;
  maxRunning?: number;
  maxBatchedTokens?: number;
  prefillTps?: number;
  decodeTps?: number;
  batchSlowdown?: number;
  kvCapacityTokens?: number;
  gpuBlocks?: number;
  blockSize?: number;
  maxModelLen?: number;
  prefixCaching?: boolean;
  seed?: number;
  outputTokens?: number;
  outputJitter?: number;
  embeddingDim?: number;
  loadSeconds?: number;
  slowStart?: number;
  metrics?: boolean;
  kvMetric?: boolean;
  slots?: boolean;
  legacyKvMetric?: boolean;
  errorRate?: number;
  crashAfter?: number;
  hang?: boolean;
  failMidStreamAfter?: number;
  failBeforeContent?: boolean;
  apiKey?: string;
}

type FlagSpec =
  | { kind: 'value'; value: ValueKind; key: Key }
  | { kind: 'list'; key: Key }
  | { kind: 'bool'; key: Key; set: boolean }
  | { kind: 'ignored-value' }
  | { kind: 'ignored-bool' }
  | { kind: 'flash-attn' }
  | { kind: 'help' };

const v = (key: Key, value: ValueKind): FlagSpec => ({ kind: 'value', value, key });
const b = (key: Key, set = true): FlagSpec => ({ kind: 'bool', key, set });
const IGNORED_VALUE: FlagSpec = { kind: 'ignored-value' };
const IGNORED_BOOL: FlagSpec = { kind: 'ignored-bool' };

/** Every flag the simulator accepts; see README.md for what each does. */
const FLAGS: Record<string, FlagSpec> = {
  '--profile': v('profile', 'string'),
  '--engine': v('engine', 'string'),
  '--host': v('host', 'string'),
  '--port': v('port', 'int'),
  '--served-model-name': { kind: 'list', key: 'servedModelNames' },
  '--alias': v('alias', 'string'),
  '-a': v('alias', 'string'),
  '--model': v('model', 'string'),
  '-m': v('model', 'string'),
  '--max-running': v('maxRunning', 'int'),
  '--max-num-seqs': v('maxRunning', 'int'),
  '--parallel': v('maxRunning', 'int'),
  '-np': v('maxRunning', 'int'),
  '--max-batched-tokens': v('maxBatchedTokens', 'int'),
  '--max-num-batched-tokens': v('maxBatchedTokens', 'int'),
  '--batch-size': v('maxBatchedTokens', 'int'),
  '-b': v('maxBatchedTokens', 'int'),
  '--prefill-tps': v('prefillTps', 'number'),
  '--decode-tps': v('decodeTps', 'number'),
  '--batch-slowdown': v('batchSlowdown', 'number'),
  '--kv-capacity-tokens': v('kvCapacityTokens', 'int'),
  '--ctx-size': v('kvCapacityTokens', 'int'),
  '-c': v('kvCapacityTokens', 'int'),
  '--num-gpu-blocks-override': v('gpuBlocks', 'int'),
  '--block-size': v('blockSize', 'int'),
  '--max-model-len': v('maxModelLen', 'int'),
  '--prefix-cache': b('prefixCaching'),
  '--enable-prefix-caching': b('prefixCaching'),
  '--no-prefix-cache': b('prefixCaching', false),
  '--no-enable-prefix-caching': b('prefixCaching', false),
  '--seed': v('seed', 'int'),
  '-s': v('seed', 'int'),
  '--output-tokens': v('outputTokens', 'int'),
  '--output-jitter': v('outputJitter', 'number'),
  '--embedding-dim': v('embeddingDim', 'int'),
  '--load-seconds': v('loadSeconds', 'number'),
  '--slow-start': v('slowStart', 'number'),
  '--metrics': b('metrics'),
  '--kv-metric': b('kvMetric'),
  '--slots': b('slots'),
  '--no-slots': b('slots', false),
  '--legacy-kv-metric': b('legacyKvMetric'),
  '--error-rate': v('errorRate', 'number'),
  '--crash-after': v('crashAfter', 'int'),
  '--hang': b('hang'),
  '--fail-mid-stream-after': v('failMidStreamAfter', 'int'),
  '--fail-before-content': b('failBeforeContent'),
  '--api-key': v('apiKey', 'string'),
  '--help': { kind: 'help' },
  '-h': { kind: 'help' },
  // Accepted for compatibility with the real engines' command lines; no effect here.
  '--tensor-parallel-size': IGNORED_VALUE,
  '-tp': IGNORED_VALUE,
  '--pipeline-parallel-size': IGNORED_VALUE,
  '-pp': IGNORED_VALUE,
  '--data-parallel-size': IGNORED_VALUE,
  '-dp': IGNORED_VALUE,
  '--gpu-memory-utilization': IGNORED_VALUE,
  '--dtype': IGNORED_VALUE,
  '--kv-cache-dtype': IGNORED_VALUE,
  '--quantization': IGNORED_VALUE,
  '--download-dir': IGNORED_VALUE,
  '--tokenizer': IGNORED_VALUE,
  '--revision': IGNORED_VALUE,
  '--swap-space': IGNORED_VALUE,
  '--distributed-executor-backend': IGNORED_VALUE,
  '--chat-template': IGNORED_VALUE,
  '--uvicorn-log-level': IGNORED_VALUE,
  '--n-gpu-layers': IGNORED_VALUE,
  '--gpu-layers': IGNORED_VALUE,
  '-ngl': IGNORED_VALUE,
  '--threads': IGNORED_VALUE,
  '-t': IGNORED_VALUE,
  '--threads-batch': IGNORED_VALUE,
  '-tb': IGNORED_VALUE,
  '--ubatch-size': IGNORED_VALUE,
  '-ub': IGNORED_VALUE,
  '--device': IGNORED_VALUE,
  '-dev': IGNORED_VALUE,
  '--split-mode': IGNORED_VALUE,
  '-sm': IGNORED_VALUE,
  '--tensor-split': IGNORED_VALUE,
  '-ts': IGNORED_VALUE,
  '--main-gpu': IGNORED_VALUE,
  '-mg': IGNORED_VALUE,
  '--cache-type-k': IGNORED_VALUE,
  '-ctk': IGNORED_VALUE,
  '--cache-type-v': IGNORED_VALUE,
  '-ctv': IGNORED_VALUE,
  '--cache-reuse': IGNORED_VALUE,
  '--n-predict': IGNORED_VALUE,
  '-n': IGNORED_VALUE,
  '--flash-attn': { kind: 'flash-attn' },
  '-fa': { kind: 'flash-attn' },
  '--trust-remote-code': IGNORED_BOOL,
  '--enforce-eager': IGNORED_BOOL,
  '--disable-log-requests': IGNORED_BOOL,
  '--enable-log-requests': IGNORED_BOOL,
  '--disable-log-stats': IGNORED_BOOL,
  '--enable-chunked-prefill': IGNORED_BOOL,
  '--no-enable-chunked-prefill': IGNORED_BOOL,
  '--no-webui': IGNORED_BOOL,
  '--cont-batching': IGNORED_BOOL,
  '-cb': IGNORED_BOOL,
  '--no-cont-batching': IGNORED_BOOL,
  '-nocb': IGNORED_BOOL,
  '--jinja': IGNORED_BOOL,
  '--mlock': IGNORED_BOOL,
  '--no-mmap': IGNORED_BOOL,
  '--embedding': IGNORED_BOOL,
  '--embeddings': IGNORED_BOOL,
  '--kv-unified': IGNORED_BOOL,
};

/** Flags only llama-server has: their presence picks the llama.cpp flavour when --engine is absent. */
const LLAMA_ONLY = new Set(['--alias', '-a', '-m', '-np', '--parallel', '-c', '--ctx-size', '-ngl', '--n-gpu-layers', '--gpu-layers', '--metrics', '--kv-metric', '--slots', '--no-slots']);

/**
 * Named hardware profiles: the engine speed and KV-cache size of one model on one GPU class,
 * derived from published figures (README.md, "Calibration"). Explicit flags override a profile.
 */
export const PROFILES: Readonly<Record<string, { readonly prefillTps: number; readonly decodeTps: number; readonly kvCapacityTokens: number }>> = {
  // vLLM serving Llama 3.1 8B (bf16) on one NVIDIA L4 24 GB: KubeAI's prefix-routing benchmark setup.
  'l4-llama-3.1-8b': { prefillTps: 3_500, decodeTps: 15, kvCapacityTokens: 30_720 },
};

/**
 * Parses the simulator's argv (without node and the script). Accepts `--flag value` and
 * `--flag=value`; a leading `serve` positional (vLLM's subcommand) is skipped; one more
 * positional is the model path. Every problem is reported, not just the first.
 */
export function parseArgs(argv: readonly string[]): ParseResult {
  const raw: RawOptions = {};
  const problems: string[] = [];
  const positionals: string[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq > 0 && arg.startsWith('--') ? arg.slice(0, eq) : arg;
    const inline = eq > 0 && arg.startsWith('--') ? arg.slice(eq + 1) : undefined;
    const spec = FLAGS[name];
    if (spec === undefined) {
      problems.push(`unknown flag ${name}`);
      continue;
    }
    seen.add(name);
    const takeValue = (): string | undefined => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || (next.startsWith('-') && !/^-\d/.test(next))) {
        problems.push(`${name}: expected a value`);
        return undefined;
      }
      i++;
      return next;
    };
    switch (spec.kind) {
      case 'help':
        return { kind: 'help' };
      case 'bool':
        if (inline !== undefined) problems.push(`${name}: takes no value, got '${inline}'`);
        (raw as Record<string, unknown>)[spec.key] = spec.set;
        break;
      case 'ignored-bool':
        if (inline !== undefined) problems.push(`${name}: takes no value, got '${inline}'`);
        break;
      case 'ignored-value':
        takeValue();
        break;
      case 'flash-attn':
        if (inline !== undefined) break;
        if (['on', 'off', 'auto'].includes(argv[i + 1] ?? '')) i++;
        break;
      case 'list': {
        const values: string[] = inline !== undefined ? [inline] : [];
        while (inline === undefined && argv[i + 1] !== undefined && !argv[i + 1].startsWith('-')) values.push(argv[++i]);
        if (values.length === 0) problems.push(`${name}: expected at least one value`);
        (raw as Record<string, unknown>)[spec.key] = values;
        break;
      }
      case 'value': {
        const text = takeValue();
        if (text === undefined) break;
        if (spec.value === 'string') {
          if (text === '') problems.push(`${name}: expected a non-empty value`);
          (raw as Record<string, unknown>)[spec.key] = text;
          break;
        }
        const n = Number(text);
        if (text.trim() === '' || !Number.isFinite(n) || (spec.value === 'int' && !Number.isInteger(n))) {
          problems.push(`${name}: expected ${spec.value === 'int' ? 'an integer' : 'a number'}, got '${text}'`);
          break;
        }
        (raw as Record<string, unknown>)[spec.key] = n;
        break;
      }
    }
  }

  // Engine: explicit, else inferred from llama-server-only flags, else vLLM.
  let engine: EngineKind = 'vllm';
  if (raw.engine !== undefined) {
    if (raw.engine === 'vllm' || raw.engine === 'llamacpp') engine = raw.engine;
    else problems.push(`--engine: expected vllm or llamacpp, got '${raw.engine}'`);
  } else if ([...seen].some((f) => LLAMA_ONLY.has(f))) {
    engine = 'llamacpp';
  }

  if (positionals[0] === 'serve' && engine === 'vllm') positionals.shift();
  if (positionals.length > 1) problems.push(`unexpected arguments: ${positionals.slice(1).join(' ')} (only one model path is accepted)`);
  if (positionals.length === 1 && raw.model !== undefined) problems.push(`model path given twice: '${positionals[0]}' and '${raw.model}'`);
  const modelPath = positionals[0] ?? raw.model;

  let servedModelNames = raw.servedModelNames;
  if (raw.alias !== undefined) {
    if (servedModelNames !== undefined) problems.push('--alias and --served-model-name both given: use one');
    servedModelNames = [raw.alias];
  }
  if (servedModelNames === undefined && modelPath !== undefined) servedModelNames = [modelPath];
  if (servedModelNames === undefined) {
    problems.push('no model name: pass --served-model-name NAME (vLLM), --alias NAME (llama.cpp) or a model path');
    servedModelNames = [];
  }

  const llama = engine === 'llamacpp';
  let profile: (typeof PROFILES)[string] | undefined;
  if (raw.profile !== undefined) {
    profile = Object.hasOwn(PROFILES, raw.profile) ? PROFILES[raw.profile] : undefined;
    if (profile === undefined) problems.push(`--profile: expected one of ${Object.keys(PROFILES).join(', ')}, got '${raw.profile}'`);
  }
  const blockSize = raw.blockSize ?? 16;
  const maxRunning = raw.maxRunning ?? (llama ? 4 : 256);
  let kvCapacityTokens = raw.kvCapacityTokens ?? profile?.kvCapacityTokens ?? (llama ? 16_384 : 131_072);
  if (raw.gpuBlocks !== undefined) {
    if (raw.kvCapacityTokens !== undefined) problems.push('--num-gpu-blocks-override and --kv-capacity-tokens both given: use one');
    kvCapacityTokens = raw.gpuBlocks * blockSize;
  }
  const capacityWhole = Math.floor(kvCapacityTokens / Math.max(1, blockSize)) * blockSize;
  // llama-server gives each of its -np slots an equal share of -c; vLLM caps at 32k by default here.
  const maxModelLen = raw.maxModelLen ?? (llama ? Math.floor(kvCapacityTokens / Math.max(1, maxRunning)) : Math.min(32_768, capacityWhole));

  const config: SimConfig = {
    engine,
    host: raw.host ?? '127.0.0.1',
    port: raw.port ?? (llama ? 8080 : 8000),
    servedModelNames,
    modelPath,
    maxRunning,
    maxBatchedTokens: raw.maxBatchedTokens ?? Math.max(maxRunning, llama ? 2048 : 8192),
    prefillTps: raw.prefillTps ?? profile?.prefillTps ?? 10_000,
    decodeTps: raw.decodeTps ?? profile?.decodeTps ?? 50,
    batchSlowdown: raw.batchSlowdown ?? 0.02,
    kvCapacityTokens,
    blockSize,
    maxModelLen,
    prefixCaching: raw.prefixCaching ?? false,
    seed: raw.seed ?? 0,
    outputTokens: raw.outputTokens ?? 64,
    outputJitter: raw.outputJitter ?? 0.5,
    embeddingDim: raw.embeddingDim ?? 384,
    loadSeconds: (raw.loadSeconds ?? 0) + (raw.slowStart ?? 0),
    metrics: llama ? (raw.metrics ?? false) : true,
    kvMetric: raw.kvMetric ?? false,
    slots: llama && (raw.slots ?? true),
    legacyKvMetric: raw.legacyKvMetric ?? false,
    errorRate: raw.errorRate ?? 0,
    crashAfter: raw.crashAfter,
    hang: raw.hang ?? false,
    failMidStreamAfter: raw.failMidStreamAfter,
    failBeforeContent: raw.failBeforeContent ?? false,
    apiKey: raw.apiKey,
  };

  // Value checks, named by the flag a user would fix.
  const check = (ok: boolean, message: string): void => {
    if (!ok) problems.push(message);
  };
  check(config.port >= 0 && config.port <= 65535, `--port: expected 0..65535, got ${config.port}`);
  check(config.servedModelNames.every((n) => n !== ''), '--served-model-name: names must be non-empty');
  check(Number.isInteger(config.seed) && config.seed >= 0, `--seed: expected an integer >= 0, got ${config.seed}`);
  check(config.outputTokens >= 1, `--output-tokens: expected >= 1, got ${config.outputTokens}`);
  check(config.outputJitter >= 0 && config.outputJitter < 1, `--output-jitter: expected 0 <= F < 1, got ${config.outputJitter}`);
  check(config.embeddingDim >= 1 && config.embeddingDim <= 65_536, `--embedding-dim: expected 1..65536, got ${config.embeddingDim}`);
  check((raw.loadSeconds ?? 0) >= 0, `--load-seconds: expected >= 0, got ${raw.loadSeconds}`);
  check((raw.slowStart ?? 0) >= 0, `--slow-start: expected >= 0, got ${raw.slowStart}`);
  check(config.errorRate >= 0 && config.errorRate <= 1, `--error-rate: expected 0 <= F <= 1, got ${config.errorRate}`);
  check(config.crashAfter === undefined || config.crashAfter >= 1, `--crash-after: expected >= 1, got ${config.crashAfter}`);
  check(config.failMidStreamAfter === undefined || config.failMidStreamAfter >= 1, `--fail-mid-stream-after: expected >= 1, got ${config.failMidStreamAfter}`);
  check(!config.kvMetric || llama, '--kv-metric: only the llama.cpp flavour has it (vLLM always exposes its KV gauge)');
  check(raw.slots === undefined || llama, '--slots/--no-slots: only the llama.cpp flavour has /slots');
  check(!config.legacyKvMetric || !llama, '--legacy-kv-metric: only the vLLM flavour has it');
  check(config.maxModelLen >= 1, `--max-model-len: expected >= 1, got ${config.maxModelLen}`);
  check(
    config.maxModelLen <= capacityWhole,
    `--max-model-len (${config.maxModelLen}) is larger than the KV cache holds (${capacityWhole} tokens): raise --kv-capacity-tokens or lower --max-model-len`,
  );
  const flagOf: Record<string, string> = {
    maxRunning: '--max-running',
    maxBatchedTokens: '--max-batched-tokens',
    prefillTps: '--prefill-tps',
    decodeTps: '--decode-tps',
    batchSlowdown: '--batch-slowdown',
    kvCapacityTokens: '--kv-capacity-tokens',
    blockSize: '--block-size',
  };
  for (const p of validateSchedulerConfig(config)) {
    problems.push(p.replace(/^(\w+)/, (m) => flagOf[m] ?? m));
  }

  return problems.length > 0 ? { kind: 'error', problems } : { kind: 'config', config };
}

/** The --help text. */
export const USAGE = `usage: sim-engine --engine vllm|llamacpp --served-model-name NAME [--port P] [options]

Simulates a vLLM or llama-server inference engine (OpenAI API, /metrics, /health) with a
modelled scheduler. Prints "sim-engine listening on http://HOST:PORT" once bound and
"sim-engine ready" once loaded. See tools/sim-engine/README.md for every flag.

  --engine vllm|llamacpp       flavour (default: llamacpp if a llama-server-only flag is given, else vllm)
  --host H --port P            bind address (default 127.0.0.1, port 8000 vllm / 8080 llamacpp; 0 = any)
  --served-model-name N [N..]  served names (vLLM); --alias N (llama.cpp); else the model path
  --max-running N              sequences decoding together (--max-num-seqs, -np)
  --max-batched-tokens N       token budget per step (--max-num-batched-tokens, -b)
  --prefill-tps R --decode-tps R --batch-slowdown F
  --profile l4-llama-3.1-8b    speed and KV size of a real GPU class (README, "Calibration"); flags override
  --kv-capacity-tokens N       KV cache size (-c for llama.cpp) --block-size N --max-model-len N
  --prefix-cache               reuse cached prompt blocks (--enable-prefix-caching)
  --seed N --output-tokens N --output-jitter F --embedding-dim N
  --load-seconds S --slow-start S
  --metrics --kv-metric        llama.cpp metrics switches; --legacy-kv-metric for vLLM
  --no-slots                   llama.cpp: GET /slots answers 501 (on by default, as in llama-server)
  --error-rate F --crash-after N --hang --fail-mid-stream-after N --fail-before-content   fault knobs
  --api-key KEY                require "Authorization: Bearer KEY" on /v1/*
`;
