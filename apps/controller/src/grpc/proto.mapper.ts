// The edge between the wire contract and the controller's domain types: every proto message
// the controller reads or writes is converted here and nowhere else. Unset optional fields stay
// undefined in both directions (absent is not zero).
import { hostForPort, type ApiEndpoint, type CollectOutcomeName, type EngineKind, type Gpu, type Model, type ModelRouting, type ReplicaMember, type ReplicaState, type RoutingPolicyName } from '@llmgw/domain';
import { cacheName } from '@llmgw/catalog';
import * as pb from '@llmgw/proto';
import type { CollectReply } from '../nodes/agent-commands.port';
import type { GpuLiveState, NodeHeartbeat, NodeRegistration, ReportedReplica } from '@llmgw/control';

const ENGINE_TO_PROTO: Record<EngineKind, pb.EngineKind> = {
  vllm: pb.EngineKind.ENGINE_KIND_VLLM,
  llamacpp: pb.EngineKind.ENGINE_KIND_LLAMACPP,
};

/** Domain engine → wire enum. */
export function engineToProto(engine: EngineKind): pb.EngineKind {
  return ENGINE_TO_PROTO[engine];
}

const API_ENDPOINT_TO_PROTO: Readonly<Record<ApiEndpoint, pb.ApiEndpoint>> = {
  chat: pb.ApiEndpoint.API_ENDPOINT_CHAT,
  completions: pb.ApiEndpoint.API_ENDPOINT_COMPLETIONS,
  embeddings: pb.ApiEndpoint.API_ENDPOINT_EMBEDDINGS,
};

/** Domain API endpoint → wire enum. */
export function apiEndpointToProto(endpoint: ApiEndpoint): pb.ApiEndpoint {
  return API_ENDPOINT_TO_PROTO[endpoint];
}

const ROUTING_POLICY_TO_PROTO: Readonly<Record<RoutingPolicyName, pb.RoutingPolicy>> = {
  'least-load': pb.RoutingPolicy.ROUTING_POLICY_LEAST_LOAD,
  'prefix-affinity': pb.RoutingPolicy.ROUTING_POLICY_PREFIX_AFFINITY,
  'round-robin': pb.RoutingPolicy.ROUTING_POLICY_ROUND_ROBIN,
};

/** A model's routing → wire; parameters the catalog left out stay unset. */
export function routingToProto(r: ModelRouting): pb.ModelRouting {
  const p = r.prefixAffinity ?? {};
  return {
    policy: ROUTING_POLICY_TO_PROTO[r.policy],
    ...(p.blockChars !== undefined ? { blockChars: p.blockChars } : {}),
    ...(p.maxBlocks !== undefined ? { maxBlocks: p.maxBlocks } : {}),
    ...(p.epsilon !== undefined ? { epsilon: p.epsilon } : {}),
  };
}

/** Wire enum → domain engine; undefined for unspecified or unknown values. */
export function engineFromProto(engine: pb.EngineKind): EngineKind | undefined {
  if (engine === pb.EngineKind.ENGINE_KIND_VLLM) return 'vllm';
  if (engine === pb.EngineKind.ENGINE_KIND_LLAMACPP) return 'llamacpp';
  return undefined;
}

const STATE_FROM_PROTO: Partial<Record<pb.ReplicaState, ReplicaState>> = {
  [pb.ReplicaState.REPLICA_STATE_PENDING]: 'pending',
  [pb.ReplicaState.REPLICA_STATE_FETCHING]: 'fetching',
  [pb.ReplicaState.REPLICA_STATE_STARTING]: 'starting',
  [pb.ReplicaState.REPLICA_STATE_READY]: 'ready',
  [pb.ReplicaState.REPLICA_STATE_DRAINING]: 'draining',
  [pb.ReplicaState.REPLICA_STATE_STOPPED]: 'stopped',
  [pb.ReplicaState.REPLICA_STATE_FAILED]: 'failed',
  [pb.ReplicaState.REPLICA_STATE_LOST]: 'lost',
};

/** Wire replica state → domain; undefined for unspecified or unknown values. */
export function replicaStateFromProto(state: pb.ReplicaState): ReplicaState | undefined {
  return STATE_FROM_PROTO[state];
}

/** A message the controller cannot use, with the field that is wrong. */
export class WireError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'WireError';
  }
}

const NODE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** `SupervisedReplica` → domain; throws WireError on an unknown engine or state. */
export function reportedReplicaFromProto(r: pb.SupervisedReplica, field = 'replicas'): ReportedReplica {
  const engine = engineFromProto(r.engine);
  const state = replicaStateFromProto(r.state);
  if (r.replicaId === '') throw new WireError(`${field}.replicaId`, 'must not be empty');
  if (engine === undefined) throw new WireError(`${field}.engine`, `unknown engine ${r.engine}`);
  if (state === undefined) throw new WireError(`${field}.state`, `unknown state ${r.state}`);
  return {
    replicaId: r.replicaId,
    model: r.model,
    engine,
    state,
    ...(r.port !== undefined && r.port > 0 ? { port: r.port } : {}),
    ...(r.pid !== undefined ? { pid: r.pid } : {}),
    ...(r.rendezvousPort !== undefined && r.rendezvousPort > 0 ? { rendezvousPort: r.rendezvousPort } : {}),
    gpuIndices: [...r.gpuIndices],
    rank: r.rank,
    restarts: r.restarts,
    ...(r.reason !== undefined && r.reason !== '' ? { reason: r.reason } : {}),
  };
}

function gpuFromProto(g: pb.Gpu): Gpu {
  return {
    index: g.index,
    uuid: g.uuid,
    name: g.name,
    gpuClass: g.gpuClass || g.name,
    memoryTotalBytes: g.memoryTotalBytes,
    ...(g.memoryUsedBytes !== undefined ? { memoryUsedBytes: g.memoryUsedBytes } : {}),
    ...(g.utilizationPct !== undefined ? { utilizationPct: g.utilizationPct } : {}),
    ...(g.temperatureC !== undefined ? { temperatureC: g.temperatureC } : {}),
    ...(g.eccErrors !== undefined ? { eccErrors: g.eccErrors } : {}),
    healthy: g.healthy,
  };
}

function entriesFromProto(entries: readonly pb.CacheEntry[]): { name: string; sizeBytes: number; modifiedAt: number }[] {
  return entries.map((e) => ({ name: e.name, sizeBytes: e.sizeBytes, modifiedAt: e.modifiedUnixMs }));
}

/** `Register` → domain; throws WireError naming the first unusable field. */
export function registrationFromProto(r: pb.Register): NodeRegistration {
  if (!NODE_ID_RE.test(r.nodeId)) throw new WireError('register.nodeId', `expected 1..128 of [A-Za-z0-9._:-] (got ${JSON.stringify(r.nodeId)})`);
  if (r.address === '') throw new WireError('register.address', 'must not be empty');
  const indices = new Set<number>();
  for (const g of r.gpus) {
    if (indices.has(g.index)) throw new WireError('register.gpus', `GPU index ${g.index} appears twice`);
    indices.add(g.index);
  }
  return {
    id: r.nodeId,
    address: r.address,
    labels: { ...r.labels },
    ...(r.fabric !== undefined && r.fabric !== '' ? { fabric: r.fabric } : {}),
    gpus: r.gpus.map(gpuFromProto),
    cpuCores: r.cpuCores,
    memoryBytes: r.memoryBytes,
    cacheDir: r.cache?.dir ?? '',
    ...(r.cache?.totalBytes !== undefined ? { cacheTotalBytes: r.cache.totalBytes } : {}),
    ...(r.cache?.freeBytes !== undefined ? { cacheFreeBytes: r.cache.freeBytes } : {}),
    cacheEntries: entriesFromProto(r.cache?.entries ?? []),
    replicas: r.replicas.map((x, i) => reportedReplicaFromProto(x, `register.replicas[${i}]`)),
    agentVersion: r.agentVersion,
  };
}

function gpuStateFromProto(g: pb.GpuState): GpuLiveState {
  return {
    index: g.index,
    ...(g.memoryUsedBytes !== undefined ? { memoryUsedBytes: g.memoryUsedBytes } : {}),
    ...(g.utilizationPct !== undefined ? { utilizationPct: g.utilizationPct } : {}),
    ...(g.temperatureC !== undefined ? { temperatureC: g.temperatureC } : {}),
    ...(g.eccErrors !== undefined ? { eccErrors: g.eccErrors } : {}),
    healthy: g.healthy,
  };
}

/** `Heartbeat` → domain. */
export function heartbeatFromProto(h: pb.Heartbeat): NodeHeartbeat {
  return {
    gpus: h.gpus.map(gpuStateFromProto),
    ...(h.cacheFreeBytes !== undefined ? { cacheFreeBytes: h.cacheFreeBytes } : {}),
    replicas: h.replicas.map((x, i) => reportedReplicaFromProto(x, `heartbeat.replicas[${i}]`)),
    ...(h.cacheListing !== undefined ? { cacheEntries: entriesFromProto(h.cacheListing.entries) } : {}),
  };
}

/** A `ReplicaStatus` in domain form. */
export interface ReplicaStatusReport {
  readonly replicaId: string;
  readonly state: ReplicaState;
  readonly reason?: string;
  readonly port?: number;
  /** Multi-node rank 0 only: the rendezvous port its agent picked. */
  readonly rendezvousPort?: number;
  readonly restarts: number;
  readonly exitCode?: number;
  readonly signal?: string;
  readonly lastLogLines: readonly string[];
}

/** `ReplicaStatus` → domain; throws WireError on an unknown state. */
export function replicaStatusFromProto(s: pb.ReplicaStatus): ReplicaStatusReport {
  const state = replicaStateFromProto(s.state);
  if (s.replicaId === '') throw new WireError('replicaStatus.replicaId', 'must not be empty');
  if (state === undefined) throw new WireError('replicaStatus.state', `unknown state ${s.state}`);
  return {
    replicaId: s.replicaId,
    state,
    ...(s.reason !== undefined && s.reason !== '' ? { reason: s.reason } : {}),
    ...(s.port !== undefined && s.port > 0 ? { port: s.port } : {}),
    ...(s.rendezvousPort !== undefined && s.rendezvousPort > 0 ? { rendezvousPort: s.rendezvousPort } : {}),
    restarts: s.restarts,
    ...(s.exitCode !== undefined ? { exitCode: s.exitCode } : {}),
    ...(s.signal !== undefined && s.signal !== '' ? { signal: s.signal } : {}),
    lastLogLines: [...s.lastLogLines],
  };
}

/** An engine failure its agent could not report when it happened (UnheardFailures); `at` in ms since the epoch. */
export interface UnheardFailureReport {
  readonly status: ReplicaStatusReport;
  readonly at: number;
}

/** `UnheardFailure` → domain; throws WireError naming the entry when it has no status or an unknown state. */
export function unheardFailureFromProto(u: pb.UnheardFailure, index: number): UnheardFailureReport {
  const field = `unheardFailures.failures[${index}]`;
  if (u.status === undefined) throw new WireError(`${field}.status`, 'is required');
  try {
    return { status: replicaStatusFromProto(u.status), at: u.atUnixMs };
  } catch (error) {
    if (error instanceof WireError) throw new WireError(`${field}.${error.field.replace(/^replicaStatus\./, 'status.')}`, error.message.slice(error.field.length + 2));
    throw error;
  }
}

/** Where a member's node is, for StartReplica's member list. */
export interface MemberAddress {
  readonly nodeId: string;
  readonly address: string;
}

/**
 * The StartReplica for one member of a replica: the model's launch inputs from the catalog, the
 * GPUs placement chose, and for a multi-node replica every member with its address and, once
 * the rank-0 agent has reported the rendezvous port it picked, `leader_address`. Without it a
 * rank-0 member picks the port; other members must not be started without it (see
 * `awaitsRendezvous`).
 */
export function startReplicaToProto(
  commandId: string,
  replicaId: string,
  model: Model,
  profileIndex: number,
  member: ReplicaMember,
  members: readonly ReplicaMember[],
  addressOf: (nodeId: string) => string,
): pb.StartReplica {
  const profile = model.profiles[profileIndex];
  const multi = members.length > 1;
  const leader = members.find((m) => m.rank === 0);
  const source = model.source;
  return {
    commandId,
    replicaId,
    model: model.name,
    engine: engineToProto(profile.engine),
    weightsSource: source,
    cacheName: cacheName(source) ?? '',
    servedName: model.name,
    aliases: [...model.aliases],
    gpuIndices: [...member.gpuIndices],
    ...(member.port !== undefined ? { port: member.port } : {}),
    rank: member.rank,
    members: multi
      ? members.map((m) => ({ nodeId: m.nodeId, address: addressOf(m.nodeId), rank: m.rank, gpuIndices: [...m.gpuIndices] }))
      : [],
    ...(multi && leader?.rendezvousPort !== undefined ? { leaderAddress: `${hostForPort(addressOf(leader.nodeId))}:${leader.rendezvousPort}` } : {}),
    ...(profile.contextLength !== undefined ? { contextLength: profile.contextLength } : {}),
    ...(profile.parallel !== undefined ? { parallel: profile.parallel } : {}),
    tensorParallel: profile.tensorParallel,
    pipelineParallel: profile.pipelineParallel,
    engineArgs: [...profile.args],
    env: { ...profile.env },
  };
}

/**
 * The model's FetchWeights, or undefined for a `file://` source (used in place, nothing to
 * fetch). `size_bytes` stays unset: the catalog's size is a figure for placement (`10GB`), not
 * the exact byte count an agent checks a download against.
 */
export function fetchWeightsToProto(commandId: string, model: Model): pb.FetchWeights | undefined {
  const name = cacheName(model.source);
  if (name === undefined) return undefined;
  return { commandId, source: model.source, cacheName: name, ...(model.sha256 !== undefined ? { sha256: model.sha256 } : {}) };
}

const COLLECT_OUTCOME_FROM_PROTO: Readonly<Record<number, CollectOutcomeName>> = {
  [pb.CollectOutcome.COLLECT_OUTCOME_REMOVED]: 'removed',
  [pb.CollectOutcome.COLLECT_OUTCOME_REFUSED]: 'refused',
  [pb.CollectOutcome.COLLECT_OUTCOME_NOT_FOUND]: 'not_found',
  [pb.CollectOutcome.COLLECT_OUTCOME_FAILED]: 'failed',
};

/** A CollectWeights `CommandResult` → domain; an unknown outcome counts as `failed`, an empty reason as none. */
export function collectReplyFromProto(r: pb.CommandResult): CollectReply {
  return {
    ok: r.ok,
    message: r.message,
    paths: r.paths.map((p) => ({ path: p.path, outcome: COLLECT_OUTCOME_FROM_PROTO[p.outcome] ?? 'failed', ...(p.reason ? { reason: p.reason } : {}) })),
  };
}
