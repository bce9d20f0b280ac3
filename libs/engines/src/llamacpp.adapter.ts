import { ENGINE_CAPABILITIES, checkProfileRules } from '@llmgw/catalog';
import type { Problem, Profile } from '@llmgw/domain';
import { resolveMapping } from '@llmgw/metrics-mappings';
import type { EngineAdapter, LaunchPlan, LaunchSpec } from './engine.adapter';
import { assertLaunchSpec, engineEnv } from './launch-spec.validator';

/** `-ngl` on a GPU profile: more layers than any model has, i.e. offload every layer. */
export const LLAMACPP_ALL_LAYERS = 999;

export interface LlamaCppAdapterOptions {
  /** llama-server executable; default `llama-server` (found on PATH). `LaunchSpec.binary` overrides it per launch. */
  readonly binary?: string;
}

/**
 * llama.cpp (`llama-server`), on CPU (`-ngl 0`, no GPU visible) or on the GPUs placement chose
 * (`-ngl 999`: every layer offloaded; profile args come last, so `-ngl N` there wins). One node,
 * no tensor or pipeline parallelism: the catalog and `launch` both refuse them.
 */
export class LlamaCppAdapter implements EngineAdapter {
  readonly kind = 'llamacpp' as const;
  readonly capabilities = ENGINE_CAPABILITIES.llamacpp;
  readonly #binary: string;

  constructor(options: LlamaCppAdapterOptions = {}) {
    this.#binary = options.binary ?? 'llama-server';
  }

  validate(profile: Profile): Problem[] {
    return checkProfileRules(profile);
  }

  launch(spec: LaunchSpec): LaunchPlan {
    assertLaunchSpec(this.kind, spec, (p) => this.validate(p));
    const { model, profile } = spec;
    const args = ['-m', spec.weightsPath, '--host', spec.host, '--port', String(spec.port), '--metrics', '--alias', model.name];
    if (profile.contextLength !== undefined) args.push('-c', String(profile.contextLength));
    if (profile.parallel !== undefined) args.push('-np', String(profile.parallel));
    args.push('-ngl', String(spec.gpuIndices.length > 0 ? LLAMACPP_ALL_LAYERS : 0), ...profile.args);
    return {
      role: 'server',
      command: spec.binary ?? this.#binary,
      args,
      env: engineEnv(profile, spec.gpuIndices),
      setup: [],
      teardown: [],
      port: spec.port,
      healthPath: '/health',
      readiness: 'http-503-until-ready',
      metrics: resolveMapping(this.kind, model.metrics),
    };
  }
}
