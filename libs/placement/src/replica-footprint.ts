import type { Model, Profile } from '@llmgw/domain';

/**
 * Host memory one replica of `model` reserves on each member node, bytes (0 = none counted): what
 * the profile states, or else, for a CPU profile, the size of the weights, which a CPU engine
 * holds in host memory. GPU profiles that state nothing reserve nothing: their GPUs bound them.
 * The one rule placement checks and every inventory builder records, so the two never disagree.
 */
export function hostMemoryOf(model: Pick<Model, 'sizeBytes'>, profile: Profile): number {
  if (profile.memoryBytes > 0) return profile.memoryBytes;
  return profile.gpuClass === undefined ? model.sizeBytes : 0;
}

/**
 * CPU replicas a node may hold: one per core, so a node is never handed more engines than it
 * can run at once. A node that reports no cores (0: unknown) is not bounded by cores.
 */
export function cpuReplicaLimit(cpuCores: number): number {
  return cpuCores > 0 ? cpuCores : Number.POSITIVE_INFINITY;
}
