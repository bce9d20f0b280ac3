import type { EngineKind, Gpu, NodeInfo, ReplicaState } from '@llmgw/domain';

/** A replica as one agent reported it (the domain form of `SupervisedReplica`). Absent = unknown. */
export interface ReportedReplica {
  readonly replicaId: string;
  readonly model: string;
  readonly engine: EngineKind;
  readonly state: ReplicaState;
  readonly port?: number;
  readonly pid?: number;
  /** Multi-node rank 0 only: the rendezvous port its agent picked. */
  readonly rendezvousPort?: number;
  readonly gpuIndices: readonly number[];
  /** This node's rank in the replica; 0 serves HTTP. */
  readonly rank: number;
  /** Restarts the agent did on its own since it was asked for the replica. */
  readonly restarts: number;
  readonly reason?: string;
}

/** What an agent says about its node when it registers (hardware, cache, supervised replicas). */
export interface NodeRegistration {
  readonly id: string;
  readonly address: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly fabric?: string;
  readonly gpus: readonly Gpu[];
  readonly cpuCores: number;
  readonly memoryBytes: number;
  readonly cacheDir: string;
  /** Absent = the agent could not read it. */
  readonly cacheTotalBytes?: number;
  readonly cacheFreeBytes?: number;
  readonly cacheEntries: NodeInfo['cache']['entries'];
  readonly replicas: readonly ReportedReplica[];
  /** Empty when the agent does not know its version. */
  readonly agentVersion: string;
}

/** The live part of one GPU from a heartbeat; `index` names a registered GPU. */
export interface GpuLiveState {
  readonly index: number;
  readonly memoryUsedBytes?: number;
  readonly utilizationPct?: number;
  readonly temperatureC?: number;
  readonly eccErrors?: number;
  readonly healthy: boolean;
}

/** A heartbeat in domain form. `cacheEntries` absent = unchanged since the last listing. */
export interface NodeHeartbeat {
  readonly gpus: readonly GpuLiveState[];
  readonly cacheFreeBytes?: number;
  readonly replicas: readonly ReportedReplica[];
  readonly cacheEntries?: NodeInfo['cache']['entries'];
}

/**
 * One node as the controller holds it. Immutable: every change makes a new entry, so a
 * snapshot taken before an `await` never changes under its reader.
 */
export interface NodeEntry {
  /** What placement and operators see; `state` and `cordoned` are the controller's view. */
  readonly info: NodeInfo;
  /** Free and total bytes of the cache filesystem; absent = not reported (then `info.cache` carries 0). */
  readonly cacheFreeBytes?: number;
  readonly cacheTotalBytes?: number;
  /** Last registration or heartbeat, ms; absent = never heard from by this process or the store. */
  readonly lastSeen?: number;
  /** An agent stream is open to this controller. */
  readonly connected: boolean;
  /** Operator asked to drain: cordoned, and its replicas are moved elsewhere. */
  readonly draining: boolean;
  readonly agentVersion?: string;
  /** The replicas the agent last listed (Register or Heartbeat, then ReplicaStatus), by id. */
  readonly reported: ReadonlyMap<string, ReportedReplica>;
  /** When the agent last sent its complete replica list; absent = not on this stream yet. */
  readonly reportedAt?: number;
}
