import { hostname } from 'node:os';
import type { Gpu, NodeCache, Problem } from '@llmgw/domain';
import type { DiscoveryLogger } from './discovery.logger';
import { ExecFileCommandRunner, type CommandRunner } from './exec-file.runner';
import type { FakeGpuGroup } from './fake-gpus.parser';
import { gpuClassMapper, type GpuClassMap } from './gpu-class.parser';
import { GpuCollector, type GpuSource } from './gpu.collector';
import { HostCollector } from './host.collector';

/** What discovery needs to know, already validated (see discovery.config.ts for the env form). */
export interface DiscoveryOptions {
  readonly cacheDir: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Interconnect domain; absent = this node takes no part in multi-node replicas. */
  readonly fabric?: string;
  /** Reported name → class; names not in it keep their own name as class. */
  readonly gpuClassMap: GpuClassMap;
  /** Simulated GPUs; non-empty replaces nvidia-smi. */
  readonly fakeGpus: readonly FakeGpuGroup[];
  /** Seed for fake GPU UUIDs; default the host name. */
  readonly fakeGpuSeed?: string;
  readonly nvidiaSmiPath: string;
  readonly nvidiaSmiTimeoutMs: number;
}

/** What this node reports about itself. Optional GPU fields stay absent when unknown. */
export interface NodeInventory {
  readonly gpus: readonly Gpu[];
  readonly gpuSource: GpuSource;
  readonly cpuCores: number;
  readonly memoryBytes: number;
  readonly cache: NodeCache;
  readonly labels: Readonly<Record<string, string>>;
  readonly fabric?: string;
  /** nvidia-smi rows or fields that could not be read (the rest is still reported). */
  readonly problems: readonly Problem[];
}

export interface DiscoveryDeps {
  readonly logger: DiscoveryLogger;
  /** Runs nvidia-smi; default execFile without a shell. */
  readonly runner?: CommandRunner;
}

/**
 * Discovers this node's inventory. Keep one instance per agent and call `discover()` for each
 * registration or heartbeat: CPU-only fallbacks and fake inventories are logged once, not per call.
 */
export class DiscoveryService {
  private readonly gpus: GpuCollector;
  private readonly host: HostCollector;

  constructor(
    private readonly options: DiscoveryOptions,
    deps: DiscoveryDeps,
  ) {
    this.gpus = new GpuCollector(deps.runner ?? new ExecFileCommandRunner(), deps.logger, {
      nvidiaSmiPath: options.nvidiaSmiPath,
      timeoutMs: options.nvidiaSmiTimeoutMs,
      gpuClassOf: gpuClassMapper(options.gpuClassMap),
      fakeGpus: options.fakeGpus,
      fakeGpuSeed: options.fakeGpuSeed ?? hostname(),
    });
    this.host = new HostCollector(options.cacheDir);
  }

  async discover(): Promise<NodeInventory> {
    const [gpus, cache] = await Promise.all([this.gpus.collect(), this.host.cache()]);
    const { cpuCores, memoryBytes } = this.host.host();
    return {
      gpus: gpus.gpus,
      gpuSource: gpus.source,
      cpuCores,
      memoryBytes,
      cache,
      labels: this.options.labels,
      ...(this.options.fabric !== undefined && { fabric: this.options.fabric }),
      problems: gpus.problems,
    };
  }
}
