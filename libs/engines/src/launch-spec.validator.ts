import { DomainError, ErrorCode, formatProblems, type EngineKind, type Problem, type Profile } from '@llmgw/domain';
import type { LaunchSpec } from './engine.adapter';

/**
 * Refuses a launch spec that does not fit its profile, listing every problem: a profile of
 * another engine or one the engine rules reject, a GPU count other than `gpusPerNode`, a rank
 * outside `0..nodes-1`, a multi-node replica without `members`, a bad port or empty path.
 */
export function assertLaunchSpec(kind: EngineKind, spec: LaunchSpec, profileProblems: (p: Profile) => Problem[]): void {
  const problems: Problem[] = [];
  const { profile } = spec;
  if (profile.engine !== kind) {
    problems.push({ path: 'profile.engine', message: `is ${profile.engine}, this adapter starts ${kind}` });
  } else {
    for (const p of profileProblems(profile)) problems.push({ path: p.path ? `profile.${p.path}` : 'profile', message: p.message });
  }
  const gpus = spec.gpuIndices;
  if (gpus.length !== profile.gpusPerNode) {
    problems.push({ path: 'gpuIndices', message: `has ${gpus.length} GPU(s), the profile wants ${profile.gpusPerNode} per node` });
  }
  if (gpus.some((g) => !Number.isSafeInteger(g) || g < 0) || new Set(gpus).size !== gpus.length) {
    problems.push({ path: 'gpuIndices', message: `must be distinct whole numbers ≥ 0 (got [${gpus.join(', ')}])` });
  }
  if (!Number.isSafeInteger(spec.rank) || spec.rank < 0 || spec.rank >= profile.nodes) {
    problems.push({ path: 'rank', message: `must be 0..${profile.nodes - 1} (got ${spec.rank})` });
  }
  if (profile.nodes > 1) {
    if (!spec.members) problems.push({ path: 'members', message: `required: the profile spans ${profile.nodes} nodes` });
    else {
      if (!spec.members.leaderAddress) problems.push({ path: 'members.leaderAddress', message: 'required' });
      if (!validPort(spec.members.leaderPort)) problems.push({ path: 'members.leaderPort', message: `must be 1..65535 (got ${spec.members.leaderPort})` });
    }
  }
  if (!validPort(spec.port)) problems.push({ path: 'port', message: `must be 1..65535 (got ${spec.port})` });
  if (!spec.weightsPath) problems.push({ path: 'weightsPath', message: 'required' });
  if (!spec.host) problems.push({ path: 'host', message: 'required' });
  if (spec.binary !== undefined && spec.binary === '') problems.push({ path: 'binary', message: 'must not be empty' });
  if (problems.length > 0) {
    throw new DomainError(
      ErrorCode.InvalidArgument,
      `cannot launch ${kind} for replica ${spec.replicaId} of ${spec.model.name}:\n${formatProblems(problems)}`,
      problems,
    );
  }
}

/**
 * The engine's environment: the profile's variables, then the GPUs placement chose. On CPU,
 * `CUDA_VISIBLE_DEVICES` is the empty string (hides every GPU), not unset: a GPU build of an
 * engine would otherwise grab device 0 on a node whose GPUs belong to other replicas.
 */
export function engineEnv(profile: Profile, gpuIndices: readonly number[]): Record<string, string> {
  const env: Record<string, string> = { ...profile.env };
  if (gpuIndices.length > 0) env.CUDA_DEVICE_ORDER = 'PCI_BUS_ID';
  env.CUDA_VISIBLE_DEVICES = gpuIndices.join(',');
  return env;
}

/** `host:port`, with IPv6 literals bracketed. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

function validPort(port: number): boolean {
  return Number.isSafeInteger(port) && port >= 1 && port <= 65535;
}
