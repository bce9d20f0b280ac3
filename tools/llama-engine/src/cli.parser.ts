/** Everything the engine needs to start, validated. Sizes in tokens, times in milliseconds. */
export interface EngineConfig {
  /** GGUF file to load (`-m`). */
  modelPath: string;
  host: string;
  /** 0: any free port; the bound one is printed. */
  port: number;
  /** Serve `/metrics` (`--metrics`); without it `/metrics` answers 501 like llama-server. */
  metrics: boolean;
  /** Model id in `/v1/models` and responses; defaults to the model path, as llama-server does. */
  alias: string;
  /** Total context over all slots (`-c`); undefined: 4096, capped at the model's training context. 0: the training context. */
  ctxSize?: number;
  /** Slots decoding at once (`-np`); further requests queue (`requests_deferred`). */
  parallel: number;
  /** Accepted for llama-server compatibility; this engine always runs on the CPU. */
  gpuLayers?: number;
  /** CPU threads for llama.cpp (`-t`). */
  threads: number;
  /** Test-only (`--debug-load-delay-ms`): wait this long before loading, so the loading state is observable. */
  debugLoadDelayMs: number;
}

/** Parsing argv gives a config, a request for help, or every problem found (each naming the flag and value). */
export type CliResult = { kind: 'config'; config: EngineConfig } | { kind: 'help' } | { kind: 'error'; problems: string[] };

/** One thread on machines with up to 4 cores (llama.cpp's default of "all cores" starves a 2-core box), else half the cores. */
export function defaultThreads(cores: number): number {
  return cores <= 4 ? 1 : Math.floor(cores / 2);
}

export const USAGE = `usage: llama-server-node -m MODEL.gguf [options]

A llama-server-compatible engine on node-llama-cpp (CPU only).

  -m, --model PATH          GGUF model file (required)
      --host HOST           address to listen on (default 127.0.0.1)
      --port N              port to listen on, 0 = any free port (default 8080)
      --metrics             serve Prometheus metrics on /metrics
      --alias NAME          model name in /v1/models and responses (default: the model path)
  -c, --ctx-size N          total context in tokens over all slots, 0 = from the model
                            (default 4096, capped at the model's training context)
  -np, --parallel N         requests decoded at once; the rest queue (default 1)
  -ngl, --n-gpu-layers N    accepted for compatibility; ignored (CPU only)
  -t, --threads N           CPU threads (default: 1 on machines with <= 4 cores, else cores/2)
  -h, --help                print this help
`;

type Spec = { key: keyof Raw; kind: 'string' | 'int' | 'flag'; min?: number };

interface Raw {
  modelPath?: string;
  host?: string;
  port?: number;
  metrics?: boolean;
  alias?: string;
  ctxSize?: number;
  parallel?: number;
  gpuLayers?: number;
  threads?: number;
  debugLoadDelayMs?: number;
}

const FLAGS: Readonly<Record<string, Spec>> = {
  '-m': { key: 'modelPath', kind: 'string' },
  '--model': { key: 'modelPath', kind: 'string' },
  '--host': { key: 'host', kind: 'string' },
  '--port': { key: 'port', kind: 'int', min: 0 },
  '--metrics': { key: 'metrics', kind: 'flag' },
  '--alias': { key: 'alias', kind: 'string' },
  '-c': { key: 'ctxSize', kind: 'int', min: 0 },
  '--ctx-size': { key: 'ctxSize', kind: 'int', min: 0 },
  '-np': { key: 'parallel', kind: 'int', min: 1 },
  '--parallel': { key: 'parallel', kind: 'int', min: 1 },
  // llama-server takes -1 as "auto" for -ngl; any layer count is accepted and ignored here.
  '-ngl': { key: 'gpuLayers', kind: 'int', min: -1 },
  '--gpu-layers': { key: 'gpuLayers', kind: 'int', min: -1 },
  '--n-gpu-layers': { key: 'gpuLayers', kind: 'int', min: -1 },
  '-t': { key: 'threads', kind: 'int', min: 1 },
  '--threads': { key: 'threads', kind: 'int', min: 1 },
  '--debug-load-delay-ms': { key: 'debugLoadDelayMs', kind: 'int', min: 0 },
};

const INT = /^-?\d+$/;

/**
 * Parses llama-server-style arguments (`--flag value` or `--flag=value`). Unknown flags, missing
 * or malformed values and repeated flags are problems; nothing is coerced. `cores` sets the
 * default thread count.
 */
export function parseCli(argv: readonly string[], cores: number): CliResult {
  const raw: Raw = {};
  const problems: string[] = [];
  const seen = new Set<keyof Raw>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') return { kind: 'help' };
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const spec = Object.prototype.hasOwnProperty.call(FLAGS, flag) ? FLAGS[flag] : undefined;
    if (spec === undefined) {
      problems.push(arg.startsWith('-') ? `unknown flag ${flag}` : `unexpected argument ${JSON.stringify(arg)}`);
      continue;
    }
    if (seen.has(spec.key)) problems.push(`${flag} given more than once`);
    seen.add(spec.key);
    if (spec.kind === 'flag') {
      if (eq > 0) problems.push(`${flag} takes no value (got ${JSON.stringify(arg.slice(eq + 1))})`);
      (raw as Record<string, unknown>)[spec.key] = true;
      continue;
    }
    let value: string | undefined;
    if (eq > 0) value = arg.slice(eq + 1);
    else if (i + 1 < argv.length) value = argv[++i];
    if (value === undefined || value === '') {
      problems.push(`${flag} needs a value`);
      continue;
    }
    if (spec.kind === 'string') {
      (raw as Record<string, unknown>)[spec.key] = value;
      continue;
    }
    const n = INT.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n)) problems.push(`${flag} must be an integer (got ${JSON.stringify(value)})`);
    else if (spec.min !== undefined && n < spec.min) problems.push(`${flag} must be >= ${spec.min} (got ${n})`);
    else if (spec.key === 'port' && n > 65535) problems.push(`${flag} must be <= 65535 (got ${n})`);
    else (raw as Record<string, unknown>)[spec.key] = n;
  }
  if (raw.modelPath === undefined && !problems.some((p) => p.startsWith('-m ') || p.startsWith('--model '))) {
    problems.push('-m/--model is required');
  }
  if (problems.length > 0 || raw.modelPath === undefined) return { kind: 'error', problems };
  return {
    kind: 'config',
    config: {
      modelPath: raw.modelPath,
      host: raw.host ?? '127.0.0.1',
      port: raw.port ?? 8080,
      metrics: raw.metrics ?? false,
      alias: raw.alias ?? raw.modelPath,
      ctxSize: raw.ctxSize,
      parallel: raw.parallel ?? 1,
      gpuLayers: raw.gpuLayers,
      threads: raw.threads ?? defaultThreads(cores),
      debugLoadDelayMs: raw.debugLoadDelayMs ?? 0,
    },
  };
}

/**
 * Context per slot, as llama-server splits it: the total (`-c`, default 4096 capped at the
 * training context; 0 = the training context) divided evenly over the slots, at least 1.
 */
export function slotContextSize(config: Pick<EngineConfig, 'ctxSize' | 'parallel'>, trainContextSize: number): number {
  const total = config.ctxSize === undefined ? Math.min(4096, trainContextSize) : config.ctxSize === 0 ? trainContextSize : config.ctxSize;
  return Math.max(1, Math.floor(total / config.parallel));
}
