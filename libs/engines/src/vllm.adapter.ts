import { ENGINE_CAPABILITIES, checkProfileRules } from '@llmgw/catalog';
import type { Problem, Profile } from '@llmgw/domain';
import { resolveMapping } from '@llmgw/metrics-mappings';
import type { EngineAdapter, LaunchPlan, LaunchSpec, ProcessSpec } from './engine.adapter';
import { assertLaunchSpec, engineEnv, hostPort } from './launch-spec.validator';

export interface VllmAdapterOptions {
  /** vLLM executable; default `vllm` (found on PATH). `LaunchSpec.binary` overrides it per launch. */
  readonly binary?: string;
  /** Ray executable for multi-node members; default `ray`. */
  readonly rayBinary?: string;
}

/**
 * vLLM (`vllm serve`). One node: one server. Several nodes: Ray — the leader (rank 0) starts a Ray
 * head as setup and serves with `--distributed-executor-backend ray`; every other member joins
 * with `ray start --address=<leader>:<port> --block`. One launch per member. Every member of a
 * multi-node replica tears down with `ray stop`, which ends the Ray processes on its node (the
 * head on rank 0, the raylet on the others), so a restart in place finds the port free.
 */
export class VllmAdapter implements EngineAdapter {
  readonly kind = 'vllm' as const;
  readonly capabilities = ENGINE_CAPABILITIES.vllm;
  readonly #binary: string;
  readonly #rayBinary: string;

  constructor(options: VllmAdapterOptions = {}) {
    this.#binary = options.binary ?? 'vllm';
    this.#rayBinary = options.rayBinary ?? 'ray';
  }

  validate(profile: Profile): Problem[] {
    return checkProfileRules(profile);
  }

  launch(spec: LaunchSpec): LaunchPlan {
    assertLaunchSpec(this.kind, spec, (p) => this.validate(p));
    const { model, profile } = spec;
    const env = engineEnv(profile, spec.gpuIndices);
    const numGpus = `--num-gpus=${spec.gpuIndices.length}`;
    const multiNode = profile.nodes > 1 && spec.members !== undefined;
    const rayAddress = multiNode && spec.members ? hostPort(spec.members.leaderAddress, spec.members.leaderPort) : undefined;
    const teardown: ProcessSpec[] = rayAddress !== undefined ? [{ command: this.#rayBinary, args: ['stop'] }] : [];

    if (rayAddress !== undefined && spec.rank > 0) {
      return {
        role: 'worker',
        command: this.#rayBinary,
        args: ['start', `--address=${rayAddress}`, numGpus, '--disable-usage-stats', '--block'],
        env,
        setup: [],
        teardown,
      };
    }
    const args = [
      'serve',
      spec.weightsPath,
      '--host',
      spec.host,
      '--port',
      String(spec.port),
      '--served-model-name',
      model.name,
      ...model.aliases,
      '--tensor-parallel-size',
      String(profile.tensorParallel),
      '--pipeline-parallel-size',
      String(profile.pipelineParallel),
    ];
    if (profile.contextLength !== undefined) args.push('--max-model-len', String(profile.contextLength));
    if (profile.parallel !== undefined) args.push('--max-num-seqs', String(profile.parallel));
    const setup: ProcessSpec[] = [];
    if (rayAddress !== undefined && spec.members) {
      args.push('--distributed-executor-backend', 'ray');
      env.RAY_ADDRESS = rayAddress;
      setup.push({
        command: this.#rayBinary,
        args: ['start', '--head', `--port=${spec.members.leaderPort}`, numGpus, '--disable-usage-stats'],
      });
    }
    args.push(...profile.args);
    return {
      role: 'server',
      command: spec.binary ?? this.#binary,
      args,
      env,
      setup,
      teardown,
      port: spec.port,
      healthPath: '/health',
      readiness: 'refuses-until-ready',
      metrics: resolveMapping(this.kind, model.metrics),
    };
  }
}
