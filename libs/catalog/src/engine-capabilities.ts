import type { ApiEndpoint, EngineKind, Model, Problem, Profile } from '@llmgw/domain';
import { deepFreeze } from './spec-values';

/** What an engine can do, as far as a catalog profile is concerned. */
export interface EngineCapabilities {
  /** Can serve without a GPU (a profile without `gpuClass`). */
  readonly cpu: boolean;
  /** A replica may span several nodes (`nodes > 1`). */
  readonly multiNode: boolean;
  /** `tensorParallel > 1` is supported. */
  readonly tensorParallel: boolean;
  /** `pipelineParallel > 1` is supported. */
  readonly pipelineParallel: boolean;
  /** GPUs must match the parallel layout: `gpusPerNode × nodes = tensorParallel × pipelineParallel`. */
  readonly gpusMatchParallelism: boolean;
  /** Weights must be one file (not a whole `hf://org/repo@rev` repository). */
  readonly singleFileWeights: boolean;
  /** Flags llmgw sets itself, with the catalog field (or component) that controls each. */
  readonly reservedArgs: Readonly<Record<string, string>>;
}

/** Capability rules per engine: the single table the catalog and `libs/engines` both apply. */
export const ENGINE_CAPABILITIES: Readonly<Record<EngineKind, EngineCapabilities>> = deepFreeze({
  vllm: {
    cpu: false,
    multiNode: true,
    tensorParallel: true,
    pipelineParallel: true,
    gpusMatchParallelism: true,
    singleFileWeights: false,
    reservedArgs: {
      '--host': 'the agent',
      '--port': 'the agent',
      '--served-model-name': 'the model name and aliases',
      '--tensor-parallel-size': 'tensorParallel',
      '-tp': 'tensorParallel',
      '--pipeline-parallel-size': 'pipelineParallel',
      '-pp': 'pipelineParallel',
      '--distributed-executor-backend': 'nodes',
      '--max-model-len': 'contextLength',
      '--max-num-seqs': 'parallel',
    },
  },
  llamacpp: {
    cpu: true,
    multiNode: false,
    tensorParallel: false,
    pipelineParallel: false,
    gpusMatchParallelism: false,
    singleFileWeights: true,
    reservedArgs: {
      '-m': 'source',
      '--model': 'source',
      '--host': 'the agent',
      '--port': 'the agent',
      '-a': 'the model name',
      '--alias': 'the model name',
      '-c': 'contextLength',
      '--ctx-size': 'contextLength',
      '-np': 'parallel',
      '--parallel': 'parallel',
    },
  },
});

/** Profile fields whose value is known to be malformed; rules that read them are skipped. */
export type InvalidFields = ReadonlySet<keyof Profile | string>;

/**
 * The engine rules for one profile, paths relative to the profile (`gpuClass`, `args[2]`; the
 * empty path is the profile itself). Rules reading a field listed in `invalid` are skipped so a
 * malformed field yields one problem, not a cascade.
 */
export function checkProfileRules(profile: Profile, invalid: InvalidFields = new Set()): Problem[] {
  const cap = ENGINE_CAPABILITIES[profile.engine];
  if (!cap) return [{ path: 'engine', message: `unknown engine ${JSON.stringify(profile.engine)}` }];
  const ok = (...fields: string[]) => fields.every((f) => !invalid.has(f));
  const problems: Problem[] = [];
  const engine = profile.engine;
  const onCpu = profile.gpuClass === undefined;

  if (onCpu && ok('gpuClass')) {
    if (!cap.cpu) problems.push({ path: 'gpuClass', message: `required for engine ${engine}` });
    if (ok('gpusPerNode') && profile.gpusPerNode > 0) {
      problems.push({ path: 'gpusPerNode', message: `must be 0 without a gpuClass (a profile without gpuClass runs on CPU)` });
    }
    if (ok('memoryPerGpu') && profile.memoryPerGpuBytes > 0) {
      problems.push({ path: 'memoryPerGpu', message: 'only for GPU profiles: set gpuClass or remove it' });
    }
  }
  if (!onCpu && ok('gpusPerNode') && profile.gpusPerNode < 1) {
    problems.push({ path: 'gpusPerNode', message: `must be at least 1 with gpuClass ${JSON.stringify(profile.gpuClass)}` });
  }
  if (!cap.multiNode && ok('nodes') && profile.nodes > 1) {
    problems.push({ path: 'nodes', message: `engine ${engine} runs a replica on one node (got ${profile.nodes})` });
  }
  if (!cap.tensorParallel && ok('tensorParallel') && profile.tensorParallel > 1) {
    problems.push({ path: 'tensorParallel', message: `engine ${engine} does not support tensor parallelism (got ${profile.tensorParallel})` });
  }
  if (!cap.pipelineParallel && ok('pipelineParallel') && profile.pipelineParallel > 1) {
    problems.push({ path: 'pipelineParallel', message: `engine ${engine} does not support pipeline parallelism (got ${profile.pipelineParallel})` });
  }
  if (cap.gpusMatchParallelism && !onCpu && profile.gpusPerNode >= 1 && ok('gpuClass', 'gpusPerNode', 'nodes', 'tensorParallel', 'pipelineParallel')) {
    const gpus = profile.gpusPerNode * profile.nodes;
    const ranks = profile.tensorParallel * profile.pipelineParallel;
    if (gpus !== ranks) {
      problems.push({
        path: '',
        message:
          `gpusPerNode × nodes (${profile.gpusPerNode} × ${profile.nodes} = ${gpus}) must equal ` +
          `tensorParallel × pipelineParallel (${profile.tensorParallel} × ${profile.pipelineParallel} = ${ranks}) for engine ${engine}`,
      });
    }
  }
  if (ok('args')) {
    profile.args.forEach((arg, i) => {
      const flag = reservedFlag(cap, arg);
      if (flag) problems.push({ path: `args[${i}]`, message: `${flag} is set by llmgw from ${cap.reservedArgs[flag]}; remove it` });
    });
  }
  if (ok('env') && 'CUDA_VISIBLE_DEVICES' in profile.env) {
    problems.push({ path: 'env.CUDA_VISIBLE_DEVICES', message: 'is set by llmgw from the GPUs placement chose; remove it' });
  }
  return problems;
}

/** True when the engine needs one weights file and `source` names a whole repository. */
export function needsSingleFile(engine: EngineKind, source: string): boolean {
  return ENGINE_CAPABILITIES[engine].singleFileWeights && /^hf:\/\/[^/@]+\/[^/@]+@/.test(source);
}

/**
 * The reserved flag `arg` sets, in any spelling an engine's parser accepts: the flag alone,
 * `--flag=value`, a long flag with `_` for `-` (vLLM and llama.cpp both read `--ctx_size` as
 * `--ctx-size`), an abbreviation of a long flag (`--serv` for argparse's `--served-model-name`),
 * and a short flag with its value attached (`-m/etc/shadow`, `-c4096`). A longer short flag
 * (`-mg`, `-ctk`) is another flag and passes.
 */
function reservedFlag(cap: EngineCapabilities, arg: string): string | undefined {
  if (!arg.startsWith('-')) return undefined;
  const eq = arg.indexOf('=');
  const head = eq > 0 ? arg.slice(0, eq) : arg;
  const reserved = Object.keys(cap.reservedArgs);
  if (head.startsWith('--')) {
    const name = head.replace(/_/g, '-');
    if (name.length <= 2) return undefined;
    return reserved.find((flag) => flag === name) ?? reserved.find((flag) => flag.startsWith('--') && flag.startsWith(name));
  }
  const exact = reserved.find((flag) => flag === head);
  if (exact) return exact;
  return reserved.find((flag) => !flag.startsWith('--') && arg.startsWith(flag) && !/^[A-Za-z][A-Za-z0-9-]*$/.test(arg.slice(flag.length)));
}

const GENERATE: readonly ApiEndpoint[] = Object.freeze(['chat', 'completions']);
const EMBED: readonly ApiEndpoint[] = Object.freeze(['embeddings']);
const NONE: readonly ApiEndpoint[] = Object.freeze([]);
/** vLLM `--task` values that make it a pooling model serving `/v1/embeddings`. */
const VLLM_EMBED_TASKS = new Set(['embed', 'embedding']);
/** vLLM `--task` values (and `--convert classify|reward`) of other pooling models: none of the three. */
const VLLM_OTHER_POOLING_TASKS = new Set(['classify', 'score', 'reward']);
/** llama.cpp reads a boolean environment variable as true for these. */
const LLAMACPP_TRUE = new Set(['1', 'true', 'on', 'enabled']);

/**
 * The API endpoints a profile serves: its explicit `endpoints`, else what its engine serves with
 * its flags. llama.cpp serves chat and completions, and only embeddings with `--embedding`/
 * `--embeddings` (or `LLAMA_ARG_EMBEDDINGS`). vLLM serves chat and completions, and only
 * embeddings as a pooling model (`--task embed`, `--runner pooling`, `--convert embed`).
 * Flag values are read in both `--flag value` and `--flag=value` forms; the last one wins.
 */
export function profileEndpoints(profile: Pick<Profile, 'engine' | 'args' | 'env' | 'endpoints'>): readonly ApiEndpoint[] {
  if (profile.endpoints !== undefined) return profile.endpoints;
  const { args } = profile;
  switch (profile.engine) {
    case 'llamacpp': {
      const embeddingsOnly =
        args.some((a) => a === '--embedding' || a === '--embeddings') || LLAMACPP_TRUE.has((profile.env.LLAMA_ARG_EMBEDDINGS ?? '').toLowerCase());
      return embeddingsOnly ? EMBED : GENERATE;
    }
    case 'vllm': {
      const task = flagValue(args, '--task');
      const runner = flagValue(args, '--runner');
      const convert = flagValue(args, '--convert');
      if ((task !== undefined && VLLM_EMBED_TASKS.has(task)) || convert === 'embed') return EMBED;
      if ((task !== undefined && VLLM_OTHER_POOLING_TASKS.has(task)) || convert === 'classify' || convert === 'reward') return NONE;
      return runner === 'pooling' ? EMBED : GENERATE;
    }
    default:
      return NONE;
  }
}

/**
 * The API endpoints a model serves: its explicit `endpoints`, else those every one of its
 * profiles serves (a request may reach a replica of any profile), in API_ENDPOINTS order.
 */
export function modelEndpoints(model: { readonly endpoints?: Model['endpoints']; readonly profiles: readonly Pick<Profile, 'engine' | 'args' | 'env' | 'endpoints'>[] }): readonly ApiEndpoint[] {
  if (model.endpoints !== undefined) return model.endpoints;
  const [first, ...rest] = model.profiles.map(profileEndpoints);
  return (first ?? NONE).filter((e) => rest.every((served) => served.includes(e)));
}

function flagValue(args: readonly string[], flag: string): string | undefined {
  let value: string | undefined;
  args.forEach((a, i) => {
    if (a === flag && i + 1 < args.length) value = args[i + 1];
    else if (a.startsWith(`${flag}=`)) value = a.slice(flag.length + 1);
  });
  return value;
}
