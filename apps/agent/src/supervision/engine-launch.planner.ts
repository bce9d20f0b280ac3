import { isAbsolute, join } from 'node:path';
import { cacheName as cacheNameOf, isCacheName, parseWeightsSource } from '@llmgw/catalog';
import { DomainError, ErrorCode, type Model, type Profile } from '@llmgw/domain';
import { adapterFor, hostPort, type LaunchMembers, type LaunchPlan } from '@llmgw/engines';
import type { ReplicaSpec } from './replica.model';

/** A program to run as an argv prefix, e.g. `[node, tools/run.cjs, tools/sim-engine/src/main.ts]`. */
export interface ProgramPrefix {
  readonly command: string;
  readonly args: readonly string[];
}

/** Node-wide settings every launch uses. */
export interface LaunchSettings {
  readonly cacheDir: string;
  /** Address engines bind to. */
  readonly engineHost: string;
  /** `vllm` executable (name on PATH or path). */
  readonly vllmBinary: string;
  /** `llama-server` executable (name on PATH or path). */
  readonly llamaServerBinary: string;
  /** Set: every engine is the simulator (`tools/sim-engine`) run with this prefix, given the engine's own argv. */
  readonly simEngine?: ProgramPrefix;
}

/** The plan for one replica member and the weights it loads. */
export interface ReplicaLaunch {
  readonly plan: LaunchPlan;
  readonly weightsPath: string;
  /** True when the weights live in the cache (and may have to be fetched first). */
  readonly cached: boolean;
}

/**
 * Where a replica's weights are on this node: `localPath` when the controller names one, the
 * path of a `file://` source (used in place, never copied), else `<cache dir>/<cache name>`. The
 * cache name is recomputed from the source here and must match what the controller sent: the
 * agent does not take a controller's word for which file in its cache belongs to which source.
 */
export function resolveWeightsPath(spec: ReplicaSpec, cacheDir: string): { path: string; cached: boolean } {
  if (spec.localPath !== undefined && spec.localPath !== '') {
    if (!isAbsolute(spec.localPath) || spec.localPath.includes('\0')) {
      throw invalid('localPath', `must be an absolute path (got ${JSON.stringify(spec.localPath)})`);
    }
    return { path: spec.localPath, cached: false };
  }
  if (spec.weightsSource.startsWith('file://')) {
    // The catalog's own parsing (percent-decoded, no . or .. segment); the agent's source
    // policy has normally admitted it already and set localPath to the checked real path.
    const parsed = parseWeightsSource(spec.weightsSource);
    if (!parsed.ok || parsed.source.kind !== 'file') {
      throw invalid('weightsSource', `${JSON.stringify(spec.weightsSource)} ${parsed.ok ? 'is not a file:// source' : parsed.reason}`);
    }
    return { path: parsed.source.path, cached: false };
  }
  const expected = cacheNameOf(spec.weightsSource);
  if (!isCacheName(spec.cacheName) || spec.cacheName !== expected) {
    throw invalid('cacheName', `${JSON.stringify(spec.cacheName)} is not the cache name of ${spec.weightsSource} (expected ${expected})`);
  }
  return { path: join(cacheDir, spec.cacheName), cached: true };
}

/**
 * Builds the engine's argv, environment and readiness through `@llmgw/engines` from the
 * controller's request and this node's settings. With the simulator override the plan keeps the
 * engine's own flags (the simulator accepts both engines' command lines) and adds `--engine`.
 * Throws a DomainError (InvalidArgument, every problem) when the request cannot be launched.
 */
export function planReplicaLaunch(spec: ReplicaSpec, port: number, settings: LaunchSettings): ReplicaLaunch {
  const weights = resolveWeightsPath(spec, settings.cacheDir);
  const nodes = Math.max(1, spec.members.length);
  const profile: Profile = {
    engine: spec.engine,
    // Only whether a class is set matters to launching (GPU vs CPU); placement matched the real one.
    ...(spec.gpuIndices.length > 0 && { gpuClass: 'assigned-by-controller' }),
    gpusPerNode: spec.gpuIndices.length,
    nodes,
    tensorParallel: Math.max(1, spec.tensorParallel),
    pipelineParallel: Math.max(1, spec.pipelineParallel),
    memoryPerGpuBytes: 0,
    memoryBytes: 0,
    ...(spec.contextLength !== undefined && { contextLength: spec.contextLength }),
    ...(spec.parallel !== undefined && { parallel: spec.parallel }),
    args: spec.engineArgs,
    env: spec.env,
  };
  const model: Model = {
    name: spec.servedName || spec.model,
    aliases: spec.aliases,
    source: spec.weightsSource,
    sizeBytes: 0,
    replicas: { min: 1, max: 1 },
    profiles: [profile],
  };
  const members = nodes > 1 && spec.leaderAddress !== undefined ? parseLeader(spec.leaderAddress) : undefined;
  const plan = adapterFor(spec.engine).launch({
    model,
    profile,
    replicaId: spec.replicaId,
    weightsPath: weights.path,
    host: settings.engineHost,
    port,
    gpuIndices: spec.gpuIndices,
    rank: spec.rank,
    ...(members && { members }),
    binary: spec.engine === 'vllm' ? settings.vllmBinary : settings.llamaServerBinary,
  });
  return { plan: settings.simEngine ? simulated(plan, spec, settings.simEngine) : plan, weightsPath: weights.path, cached: weights.cached };
}

/** The same plan with the simulator in place of the engine (and of Ray, which it does not need). */
function simulated(plan: LaunchPlan, spec: ReplicaSpec, sim: ProgramPrefix): LaunchPlan {
  if (plan.role === 'worker') {
    // A multi-node worker serves nothing: stand in with a process that only stays alive.
    return { ...plan, command: sim.command, args: ['-e', 'setInterval(() => undefined, 1 << 30)'], setup: [], teardown: [] };
  }
  return { ...plan, command: sim.command, args: [...sim.args, ...plan.args, '--engine', spec.engine], setup: [], teardown: [] };
}

/**
 * The rendezvous port a multi-node rank-0 member listens on (the Ray head for vLLM), from its
 * `leaderAddress`; undefined on every other member, on single-node replicas and while unset.
 */
export function rendezvousPortOf(spec: ReplicaSpec): number | undefined {
  if (spec.rank !== 0 || spec.members.length < 2 || spec.leaderAddress === undefined) return undefined;
  const port = /:(\d{1,5})$/.exec(spec.leaderAddress)?.[1];
  return port === undefined ? undefined : Number(port);
}

/**
 * The same request with the rendezvous address the agent chose: a multi-node rank-0 member
 * whose controller named none gets its own address (as the members list names it) and `port`,
 * which this node's agent picked like an engine port. Any other request is returned unchanged.
 */
export function withRendezvousPort(spec: ReplicaSpec, port: number): ReplicaSpec {
  const self = spec.members.find((m) => m.rank === 0);
  if (!self || self.address === '') throw invalid('members', 'a multi-node replica needs its rank-0 member with an address');
  return { ...spec, leaderAddress: hostPort(self.address, port) };
}

/** True for a multi-node rank-0 request that leaves the rendezvous port to this agent. */
export function picksRendezvousPort(spec: ReplicaSpec): boolean {
  return spec.rank === 0 && spec.members.length > 1 && spec.leaderAddress === undefined;
}

function parseLeader(address: string): LaunchMembers {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65_535) throw invalid('leaderAddress', `expected host:port (got ${JSON.stringify(address)})`);
  return { leaderAddress: m[1].replace(/^\[|\]$/g, ''), leaderPort: port };
}

function invalid(path: string, message: string): DomainError {
  return new DomainError(ErrorCode.InvalidArgument, `${path}: ${message}`, [{ path, message }]);
}
