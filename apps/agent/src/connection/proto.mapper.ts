// The agent's edge: domain values to wire messages and back. Unknown stays unset on the wire.
import type { CacheEntry as DomainCacheEntry, EngineKind as DomainEngineKind, Gpu as DomainGpu } from '@llmgw/domain';
import {
  CollectOutcome,
  EngineKind,
  ReplicaState,
  type CacheEntry,
  type CommandResult,
  type ConnectRequest,
  type Gpu,
  type GpuState,
  type ReplicaStatus,
  type StartReplica,
  type SupervisedReplica,
} from '@llmgw/proto';
import type { AgentReplicaState, ReplicaSnapshot, ReplicaSpec, ReplicaStatusEvent } from '../supervision/replica.model';
import type { CollectedPath } from '../weights/weights.collector';

const ENGINE_TO_WIRE: Readonly<Record<DomainEngineKind, EngineKind>> = {
  vllm: EngineKind.ENGINE_KIND_VLLM,
  llamacpp: EngineKind.ENGINE_KIND_LLAMACPP,
};

const STATE_TO_WIRE: Readonly<Record<AgentReplicaState, ReplicaState>> = {
  fetching: ReplicaState.REPLICA_STATE_FETCHING,
  starting: ReplicaState.REPLICA_STATE_STARTING,
  ready: ReplicaState.REPLICA_STATE_READY,
  stopped: ReplicaState.REPLICA_STATE_STOPPED,
  failed: ReplicaState.REPLICA_STATE_FAILED,
};

const COLLECT_TO_WIRE: Readonly<Record<CollectedPath['outcome'], CollectOutcome>> = {
  removed: CollectOutcome.COLLECT_OUTCOME_REMOVED,
  refused: CollectOutcome.COLLECT_OUTCOME_REFUSED,
  'not-found': CollectOutcome.COLLECT_OUTCOME_NOT_FOUND,
  failed: CollectOutcome.COLLECT_OUTCOME_FAILED,
};

export function engineToWire(engine: DomainEngineKind): EngineKind {
  return ENGINE_TO_WIRE[engine];
}

/** The domain engine of a wire value; undefined for UNSPECIFIED or a value this agent does not know. */
export function engineFromWire(engine: EngineKind): DomainEngineKind | undefined {
  if (engine === EngineKind.ENGINE_KIND_VLLM) return 'vllm';
  if (engine === EngineKind.ENGINE_KIND_LLAMACPP) return 'llamacpp';
  return undefined;
}

export function stateToWire(state: AgentReplicaState): ReplicaState {
  return STATE_TO_WIRE[state];
}

export function gpuToWire(gpu: DomainGpu): Gpu {
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    name: gpu.name,
    gpuClass: gpu.gpuClass,
    memoryTotalBytes: gpu.memoryTotalBytes,
    ...(gpu.memoryUsedBytes !== undefined && { memoryUsedBytes: gpu.memoryUsedBytes }),
    ...(gpu.utilizationPct !== undefined && { utilizationPct: Math.round(gpu.utilizationPct) }),
    ...(gpu.temperatureC !== undefined && { temperatureC: Math.round(gpu.temperatureC) }),
    ...(gpu.eccErrors !== undefined && { eccErrors: gpu.eccErrors }),
    healthy: gpu.healthy,
  };
}

export function gpuStateToWire(gpu: DomainGpu): GpuState {
  return {
    index: gpu.index,
    ...(gpu.memoryUsedBytes !== undefined && { memoryUsedBytes: gpu.memoryUsedBytes }),
    ...(gpu.utilizationPct !== undefined && { utilizationPct: Math.round(gpu.utilizationPct) }),
    ...(gpu.temperatureC !== undefined && { temperatureC: Math.round(gpu.temperatureC) }),
    ...(gpu.eccErrors !== undefined && { eccErrors: gpu.eccErrors }),
    healthy: gpu.healthy,
  };
}

export function cacheEntryToWire(entry: DomainCacheEntry): CacheEntry {
  return { name: entry.name, sizeBytes: entry.sizeBytes, modifiedUnixMs: Math.max(0, Math.round(entry.modifiedAt)) };
}

export function supervisedToWire(r: ReplicaSnapshot): SupervisedReplica {
  return {
    replicaId: r.replicaId,
    model: r.model,
    engine: engineToWire(r.engine),
    state: stateToWire(r.state),
    ...(r.port !== undefined && { port: r.port }),
    ...(r.pid !== undefined && { pid: r.pid }),
    ...(r.rendezvousPort !== undefined && { rendezvousPort: r.rendezvousPort }),
    gpuIndices: [...r.gpuIndices],
    rank: r.rank,
    restarts: r.restarts,
    ...(r.reason !== undefined && { reason: r.reason }),
  };
}

export function replicaStatusMessage(e: ReplicaStatusEvent): ConnectRequest {
  return { payload: { $case: 'replicaStatus', value: replicaStatusToWire(e) } };
}

export function replicaStatusToWire(e: ReplicaStatusEvent): ReplicaStatus {
  return {
    replicaId: e.replicaId,
    state: stateToWire(e.state),
    ...(e.reason !== undefined && { reason: e.reason }),
    ...(e.exitCode !== undefined && { exitCode: e.exitCode }),
    ...(e.signal !== undefined && { signal: e.signal }),
    lastLogLines: [...e.lastLogLines],
    restarts: e.restarts,
    ...(e.port !== undefined && { port: e.port }),
    ...(e.pid !== undefined && { pid: e.pid }),
    ...(e.fetchedBytes !== undefined && { fetchedBytes: e.fetchedBytes }),
    ...(e.fetchTotalBytes !== undefined && { fetchTotalBytes: e.fetchTotalBytes }),
    ...(e.rendezvousPort !== undefined && { rendezvousPort: e.rendezvousPort }),
  };
}

export function commandResultMessage(commandId: string, ok: boolean, message: string, paths: readonly CollectedPath[] = []): ConnectRequest {
  const value: CommandResult = {
    commandId,
    ok,
    message,
    paths: paths.map((p) => ({ path: p.path, outcome: COLLECT_TO_WIRE[p.outcome], reason: p.reason })),
  };
  return { payload: { $case: 'commandResult', value } };
}

/**
 * The domain form of StartReplica; throws an Error naming the field when the request cannot be
 * one (an engine this agent does not know).
 */
export function replicaSpecFromWire(m: StartReplica): ReplicaSpec {
  const engine = engineFromWire(m.engine);
  if (engine === undefined) throw new Error(`engine ${m.engine} is not one this agent runs (vllm, llamacpp)`);
  return {
    replicaId: m.replicaId,
    model: m.model,
    engine,
    weightsSource: m.weightsSource,
    cacheName: m.cacheName,
    ...(m.localPath !== undefined && m.localPath !== '' && { localPath: m.localPath }),
    servedName: m.servedName,
    aliases: [...m.aliases],
    gpuIndices: [...m.gpuIndices],
    ...(m.port !== undefined && m.port !== 0 && { port: m.port }),
    rank: m.rank,
    members: m.members.map((x) => ({ nodeId: x.nodeId, address: x.address, rank: x.rank })),
    ...(m.leaderAddress !== undefined && m.leaderAddress !== '' && { leaderAddress: m.leaderAddress }),
    ...(m.contextLength !== undefined && { contextLength: m.contextLength }),
    ...(m.parallel !== undefined && { parallel: m.parallel }),
    tensorParallel: m.tensorParallel,
    pipelineParallel: m.pipelineParallel,
    engineArgs: [...m.engineArgs],
    env: { ...m.env },
  };
}
