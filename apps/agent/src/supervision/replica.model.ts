import type { EngineKind } from '@llmgw/domain';

/**
 * One member of one replica as the controller asked for it (the domain form of `StartReplica`).
 * Absent optional fields are unknown / not set, never 0.
 */
export interface ReplicaSpec {
  readonly replicaId: string;
  /** Catalog model name. */
  readonly model: string;
  readonly engine: EngineKind;
  /** `file://`, `http(s)://` or `hf://...`. */
  readonly weightsSource: string;
  /** Name of the weights in the cache directory; empty for `file://` sources. */
  readonly cacheName: string;
  /** Where the engine loads weights from when not `<cache dir>/<cacheName>`. */
  readonly localPath?: string;
  /** Name the engine serves, and its aliases. */
  readonly servedName: string;
  readonly aliases: readonly string[];
  /** GPUs this member holds; empty on CPU. */
  readonly gpuIndices: readonly number[];
  /** Port the engine listens on; absent = the agent picks a free one. */
  readonly port?: number;
  /** 0 serves HTTP. */
  readonly rank: number;
  /** Every member of a multi-node replica (empty for a single-node one). */
  readonly members: readonly { readonly nodeId: string; readonly address: string; readonly rank: number }[];
  /**
   * `host:port` members rendezvous at (multi-node only). Unset on a rank-0 request: its agent
   * then picks the port and reports it as `rendezvousPort`.
   */
  readonly leaderAddress?: string;
  readonly contextLength?: number;
  readonly parallel?: number;
  readonly tensorParallel: number;
  readonly pipelineParallel: number;
  /** Extra engine arguments (argv, never a shell string). */
  readonly engineArgs: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** The states a replica has on a node (the controller's other states are its own bookkeeping). */
export type AgentReplicaState = 'fetching' | 'starting' | 'ready' | 'stopped' | 'failed';

/** A supervised replica as it stands now: what Register and Heartbeat carry. */
export interface ReplicaSnapshot {
  readonly replicaId: string;
  readonly model: string;
  readonly engine: EngineKind;
  readonly state: AgentReplicaState;
  /** Absent until the engine has a port. */
  readonly port?: number;
  /** Absent while no engine process runs. */
  readonly pid?: number;
  /** Multi-node rank 0 only: the rendezvous port (Ray head) this agent picked. */
  readonly rendezvousPort?: number;
  readonly gpuIndices: readonly number[];
  readonly rank: number;
  /** Restarts after crashes since the controller asked for this replica. */
  readonly restarts: number;
  readonly reason?: string;
}

/** A change of state, sent as it happens (ReplicaStatus). */
export interface ReplicaStatusEvent extends Pick<ReplicaSnapshot, 'replicaId' | 'state' | 'restarts' | 'port' | 'pid' | 'reason' | 'rendezvousPort'> {
  /** Set when the engine exited on its own with a status. */
  readonly exitCode?: number;
  /** Set when a signal ended the engine, e.g. `SIGKILL`. */
  readonly signal?: string;
  /** The engine's last output lines, oldest first (failed replicas). */
  readonly lastLogLines: readonly string[];
  /** Weights download progress while fetching; total absent when unknown. */
  readonly fetchedBytes?: number;
  readonly fetchTotalBytes?: number;
}

const REPLICA_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * True for replica ids the agent accepts. Ids name files in the state directory, so they are
 * restricted to `[A-Za-z0-9._-]`, 1..128 long, starting with a letter or digit.
 */
export function isValidReplicaId(id: string): boolean {
  return REPLICA_ID_RE.test(id);
}
