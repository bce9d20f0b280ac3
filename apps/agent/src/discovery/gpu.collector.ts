import type { Gpu, Problem } from '@llmgw/domain';
import type { DiscoveryLogger } from './discovery.logger';
import { CommandError, type CommandRunner } from './exec-file.runner';
import { fakeGpus, type FakeGpuGroup } from './fake-gpus.parser';
import { NVIDIA_SMI_QUERY_ARGS, parseNvidiaSmiCsv } from './nvidia-smi.parser';

/** Where a node's GPU list came from: the driver, a simulation, or nowhere (CPU-only). */
export type GpuSource = 'nvidia-smi' | 'fake' | 'none';

export interface GpuDiscovery {
  readonly gpus: readonly Gpu[];
  readonly source: GpuSource;
  /** Rows nvidia-smi printed that could not be (fully) read; the GPUs that parsed are still listed. */
  readonly problems: readonly Problem[];
}

export interface GpuCollectorOptions {
  /** Program to run; looked up on PATH unless it contains a `/`. */
  readonly nvidiaSmiPath: string;
  readonly timeoutMs: number;
  readonly gpuClassOf: (name: string) => string;
  /** Non-empty: nvidia-smi is not run and these simulated GPUs are reported instead. */
  readonly fakeGpus?: readonly FakeGpuGroup[];
  /** Seed for deterministic fake UUIDs, e.g. the node name. */
  readonly fakeGpuSeed: string;
}

/**
 * Lists this node's GPUs on every `collect()`: from nvidia-smi, or from the fake inventory when
 * one is configured. nvidia-smi missing or failing means a CPU-only node (no GPUs, source
 * `none`), never an error. Each situation (fake inventory, CPU-only, recovery, a new set of row
 * problems) is logged once when it starts, not on every call.
 */
export class GpuCollector {
  private lastSituation: string | undefined;
  private lastProblems = '';

  constructor(
    private readonly runner: CommandRunner,
    private readonly logger: DiscoveryLogger,
    private readonly options: GpuCollectorOptions,
  ) {}

  async collect(): Promise<GpuDiscovery> {
    const fake = this.options.fakeGpus;
    if (fake && fake.length > 0) {
      const gpus = fakeGpus(fake, this.options.fakeGpuSeed);
      this.once('fake', () =>
        this.logger.warn(
          { gpuSource: 'fake', gpus: gpus.length, classes: fake.map((g) => `${g.count}x${g.gpuClass}`) },
          `SIMULATED GPUS: reporting ${gpus.length} fake GPU(s) from LLMGW_AGENT_FAKE_GPUS; nvidia-smi is not run and nothing real backs them`,
        ),
      );
      return { gpus, source: 'fake', problems: [] };
    }

    let output: string;
    try {
      output = await this.runner.run(this.options.nvidiaSmiPath, NVIDIA_SMI_QUERY_ARGS, { timeoutMs: this.options.timeoutMs });
    } catch (error) {
      const reason = error instanceof CommandError ? error.message : String(error);
      this.once('none', () => this.logger.warn({ gpuSource: 'none', reason }, `no GPUs: ${reason}; this node reports as CPU-only`));
      return { gpus: [], source: 'none', problems: [] };
    }

    const { gpus, problems } = parseNvidiaSmiCsv(output, { gpuClassOf: this.options.gpuClassOf });
    const recovered = this.lastSituation === 'none';
    this.once('nvidia-smi', () =>
      this.logger.info({ gpuSource: 'nvidia-smi', gpus: gpus.length }, `${recovered ? 'nvidia-smi answers again: ' : ''}${gpus.length} GPU(s) found by nvidia-smi`),
    );
    const problemKey = JSON.stringify(problems);
    if (problemKey !== this.lastProblems) {
      this.lastProblems = problemKey;
      if (problems.length > 0) this.logger.warn({ problems }, `nvidia-smi printed ${problems.length} row problem(s); those GPUs or fields are left out`);
    }
    return { gpus, source: 'nvidia-smi', problems };
  }

  private once(situation: string, log: () => void): void {
    if (situation === this.lastSituation) return;
    this.lastSituation = situation;
    log();
  }
}
