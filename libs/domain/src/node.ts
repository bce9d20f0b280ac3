/** A node's health as the controller sees it from heartbeats. */
export const NODE_STATES = ['healthy', 'unreachable', 'lost'] as const;
export type NodeState = (typeof NODE_STATES)[number];

/**
 * One GPU as discovered on a node. Optional fields are unknown when absent (an old driver, a
 * card that does not report them) and must never be read as 0. Memory in bytes.
 */
export interface Gpu {
  readonly index: number;
  readonly uuid: string;
  /** Name as the driver reports it, e.g. `NVIDIA H100 80GB HBM3`. */
  readonly name: string;
  /** Class used by placement (configurable mapping from the name; default the name). */
  readonly gpuClass: string;
  readonly memoryTotalBytes: number;
  readonly memoryUsedBytes?: number;
  /** Percent 0..100. */
  readonly utilizationPct?: number;
  readonly temperatureC?: number;
  readonly eccErrors?: number;
  readonly healthy: boolean;
}

/** A file or directory in a node's weights cache. `modifiedAt` in ms since the epoch. */
export interface CacheEntry {
  readonly name: string;
  readonly sizeBytes: number;
  readonly modifiedAt: number;
}

export interface NodeCache {
  readonly dir: string;
  readonly totalBytes: number;
  readonly freeBytes: number;
  readonly entries: readonly CacheEntry[];
}

/** Everything placement and the operator need to know about one node. */
export interface NodeInfo {
  readonly id: string;
  /** Host or IP routers use to reach this node's engines. */
  readonly address: string;
  readonly labels: Readonly<Record<string, string>>;
  /** Interconnect domain a multi-node replica must stay inside; absent = cannot take part. */
  readonly fabric?: string;
  readonly gpus: readonly Gpu[];
  readonly cpuCores: number;
  readonly memoryBytes: number;
  readonly cache: NodeCache;
  readonly state: NodeState;
  readonly cordoned: boolean;
}
