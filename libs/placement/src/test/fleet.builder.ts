// Test-only builders for nodes, GPUs and models with defaults a test can override field by field.
import type { Gpu, Model, NodeInfo, Profile } from '@llmgw/domain';

export const GB = 1e9;

export function gpu(index: number, gpuClass = 'H100', over: Partial<Gpu> = {}): Gpu {
  return {
    index,
    uuid: `GPU-${gpuClass}-${index}`,
    name: gpuClass,
    gpuClass,
    memoryTotalBytes: 80 * GB,
    healthy: true,
    ...over,
  };
}

/** A healthy, uncordoned node with `gpuCount` GPUs of `gpuClass`, 100 GB cache free, 512 GB RAM. */
export function node(id: string, gpuCount = 8, gpuClass = 'H100', over: Partial<NodeInfo> = {}): NodeInfo {
  return {
    id,
    address: `${id}.local`,
    labels: {},
    gpus: Array.from({ length: gpuCount }, (_, i) => gpu(i, gpuClass)),
    cpuCores: 64,
    memoryBytes: 512 * GB,
    cache: { dir: '/var/lib/llmgw/cache', totalBytes: 1000 * GB, freeBytes: 100 * GB, entries: [] },
    state: 'healthy',
    cordoned: false,
    ...over,
  };
}

export function withCache(n: NodeInfo, freeBytes: number, names: string[] = []): NodeInfo {
  return {
    ...n,
    cache: { ...n.cache, freeBytes, entries: names.map((name) => ({ name, sizeBytes: 1, modifiedAt: 1 })) },
  };
}

export function gpuProfile(gpuClass: string, gpusPerNode: number, over: Partial<Profile> = {}): Profile {
  const nodes = over.nodes ?? 1;
  return {
    engine: 'vllm',
    gpuClass,
    gpusPerNode,
    nodes,
    tensorParallel: gpusPerNode,
    pipelineParallel: nodes,
    memoryPerGpuBytes: 0,
    memoryBytes: 0,
    args: [],
    env: {},
    ...over,
  };
}

export function cpuProfile(over: Partial<Profile> = {}): Profile {
  return {
    engine: 'llamacpp',
    gpusPerNode: 0,
    nodes: 1,
    tensorParallel: 1,
    pipelineParallel: 1,
    memoryPerGpuBytes: 0,
    memoryBytes: 0,
    args: [],
    env: {},
    ...over,
  };
}

export function model(name: string, profiles: Profile[], over: Partial<Model> = {}): Model {
  return {
    name,
    aliases: [],
    source: `hf://org/${name}@main`,
    sizeBytes: 16 * GB,
    replicas: { min: 1, max: 1 },
    profiles,
    ...over,
  };
}
