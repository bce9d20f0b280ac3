import { z } from 'zod';
import { env, envVar, type DeepReadonly, type EnvParse } from '@llmgw/config';
import type { Problem } from '@llmgw/domain';
import type { DiscoveryOptions } from './discovery.service';
import { parseFakeGpuSpec, type FakeGpuGroup } from './fake-gpus.parser';
import { parseGpuClassMap, type GpuClassMap } from './gpu-class.parser';
import { parseLabels } from './labels.parser';

/** Adapts a discovery parser to the config lib: every problem, `entry[i]: why`, in one reason. */
function fromParser<T>(parse: (spec: string, path: string) => { value: T; problems: Problem[] }): EnvParse<T> {
  return (raw) => {
    const { value, problems } = parse(raw, 'entry');
    return problems.length === 0 ? { ok: true, value } : { ok: false, reason: problems.map((p) => `${p.path}: ${p.message}`).join('; ') };
  };
}

/**
 * The agent's discovery settings (unset or empty = the default). Spread into the agent's
 * `z.object({...})` and map with {@link discoveryOptions}.
 */
export const DISCOVERY_ENV = {
  /** Weights cache directory, made absolute; default ./.llmgw/cache. */
  LLMGW_AGENT_CACHE_DIR: env.path({ default: './.llmgw/cache' }),
  /** Node labels `key=value,key=value`; default none. */
  LLMGW_AGENT_LABELS: envVar(fromParser(parseLabels), { default: {} as Readonly<Record<string, string>> }),
  /** Interconnect domain for multi-node replicas; unset = this node takes no part in them. */
  LLMGW_AGENT_FABRIC: env.string({ optional: true }),
  /** `<reported name>=<class>;...`, e.g. `NVIDIA H100 80GB HBM3=H100-80GB`; unmapped names are their own class. */
  LLMGW_AGENT_GPU_CLASS_MAP: envVar(fromParser(parseGpuClassMap), { default: {} as GpuClassMap }),
  /** Simulated GPUs `<count>x<class>[:<N>GB],...`, e.g. `8xH100-80GB`; set = nvidia-smi is not run. */
  LLMGW_AGENT_FAKE_GPUS: envVar(fromParser(parseFakeGpuSpec), { default: [] as FakeGpuGroup[] }),
  /** The nvidia-smi program: a name looked up on PATH, or a path; default nvidia-smi. */
  LLMGW_AGENT_NVIDIA_SMI: env.string({ default: 'nvidia-smi' }),
  /** How long nvidia-smi may take before the node counts as CPU-only for that round; default 10s. */
  LLMGW_AGENT_NVIDIA_SMI_TIMEOUT: env.duration({ default: '10s' }),
} as const;

export const discoveryEnvSchema = z.object(DISCOVERY_ENV);
export type DiscoveryEnv = z.output<typeof discoveryEnvSchema>;

/** The parsed variables as DiscoveryOptions; `fakeGpuSeed` (e.g. the node id) keeps fake UUIDs apart per node. */
export function discoveryOptions(e: DeepReadonly<DiscoveryEnv>, extra: { fakeGpuSeed?: string } = {}): DiscoveryOptions {
  return {
    cacheDir: e.LLMGW_AGENT_CACHE_DIR,
    labels: e.LLMGW_AGENT_LABELS,
    ...(e.LLMGW_AGENT_FABRIC !== undefined && { fabric: e.LLMGW_AGENT_FABRIC }),
    gpuClassMap: e.LLMGW_AGENT_GPU_CLASS_MAP,
    fakeGpus: e.LLMGW_AGENT_FAKE_GPUS,
    ...(extra.fakeGpuSeed !== undefined && { fakeGpuSeed: extra.fakeGpuSeed }),
    nvidiaSmiPath: e.LLMGW_AGENT_NVIDIA_SMI,
    nvidiaSmiTimeoutMs: e.LLMGW_AGENT_NVIDIA_SMI_TIMEOUT,
  };
}
