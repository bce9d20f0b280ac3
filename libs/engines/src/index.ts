export { ADAPTERS, adapterFor } from './adapter.registry';
export type {
  EngineAdapter,
  LaunchMembers,
  LaunchPlan,
  LaunchSpec,
  ProcessSpec,
  Readiness,
  ServerLaunchPlan,
  WorkerLaunchPlan,
} from './engine.adapter';
export { engineEnv, hostPort } from './launch-spec.validator';
export { LLAMACPP_ALL_LAYERS, LlamaCppAdapter, type LlamaCppAdapterOptions } from './llamacpp.adapter';
export { VllmAdapter, type VllmAdapterOptions } from './vllm.adapter';
