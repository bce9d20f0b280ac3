import type { ReplicaMember, ReplicaState } from '@llmgw/domain';
import type { ReplicaEntry } from './replica.entry';

/** One member's report, as an agent sent it. */
export interface MemberReport {
  readonly nodeId: string;
  readonly state: ReplicaState;
  readonly reason?: string;
  /** The engine's port (rank 0 serves HTTP on it). */
  readonly port?: number;
  /** Multi-node rank 0: the rendezvous port its agent picked. */
  readonly rendezvousPort?: number;
}

const PROGRESS: readonly ReplicaState[] = ['pending', 'fetching', 'starting', 'ready'];

/**
 * The replica after one member's report. Pure. A replica being stopped only learns that members
 * stopped (all stopped = `stopped`); a stopped or lost one ignores reports. Otherwise the
 * replica is `failed` when any member failed or stopped on its own, `ready` when every member
 * is, else the least advanced member's state. Entering `failed` stamps `failedAt`; leaving it
 * clears it. A report that changes nothing returns the same entry.
 */
export function foldMemberReport(entry: ReplicaEntry, report: MemberReport, now: number): ReplicaEntry {
  const replica = entry.replica;
  const member = replica.members.find((m) => m.nodeId === report.nodeId);
  if (!member || replica.state === 'stopped' || replica.state === 'lost') return entry;

  if (replica.state === 'draining') {
    if (report.state !== 'stopped' && report.state !== 'failed') return entry;
    const memberStates = { ...entry.memberStates, [report.nodeId]: 'stopped' as ReplicaState };
    const allStopped = replica.members.every((m) => memberStates[m.nodeId] === 'stopped');
    if (!allStopped) return entry.memberStates[report.nodeId] === 'stopped' ? entry : { ...entry, memberStates };
    return { ...entry, memberStates, dirty: true, replica: { ...replica, state: 'stopped', updatedAt: now } };
  }

  const own = normalise(report.state);
  const memberStates = { ...entry.memberStates, [report.nodeId]: own };
  let members: readonly ReplicaMember[] = replica.members;
  if (report.port !== undefined && member.port !== report.port) {
    members = members.map((m) => (m.nodeId === report.nodeId ? { ...m, port: report.port } : m));
  }
  if (report.rendezvousPort !== undefined && member.rank === 0 && member.rendezvousPort !== report.rendezvousPort) {
    members = members.map((m) => (m.nodeId === report.nodeId ? { ...m, rendezvousPort: report.rendezvousPort } : m));
  }
  const states = replica.members.map((m) => memberStates[m.nodeId] ?? 'pending');
  let state: ReplicaState;
  let reason: string | undefined;
  if (states.includes('failed')) {
    state = 'failed';
    reason = own === 'failed' ? (report.reason ?? `${report.state} on node ${report.nodeId}`) : replica.reason;
  } else if (states.every((s) => s === 'ready')) {
    state = 'ready';
  } else {
    state = PROGRESS[Math.min(...states.map((s) => PROGRESS.indexOf(s)))];
    reason = own === state ? report.reason : undefined;
  }
  if (state === replica.state && members === replica.members && reason === replica.reason) {
    return sameStates(entry.memberStates, memberStates) ? entry : { ...entry, memberStates };
  }
  const failedAt = state === 'failed' ? (replica.state === 'failed' ? entry.failedAt : now) : undefined;
  const next: ReplicaEntry = {
    ...entry,
    memberStates,
    dirty: true,
    replica: {
      ...withoutReason(replica),
      state,
      members,
      ...(reason !== undefined ? { reason } : {}),
      updatedAt: now,
    },
  };
  if (failedAt === undefined) {
    const { failedAt: _f, retryAt: _r, ...rest } = next;
    return rest;
  }
  return { ...next, failedAt };
}

/** An agent-side state as the replica sees it: stopping on its own is failing; anything unknown is starting. */
function normalise(state: ReplicaState): ReplicaState {
  if (state === 'stopped' || state === 'lost') return 'failed';
  if (state === 'draining') return 'starting';
  return state;
}

function withoutReason<T extends { reason?: string }>(r: T): T {
  const { reason: _reason, ...rest } = r;
  return rest as T;
}

function sameStates(a: Readonly<Record<string, ReplicaState>>, b: Readonly<Record<string, ReplicaState>>): boolean {
  const keys = Object.keys(b);
  return keys.length === Object.keys(a).length && keys.every((k) => a[k] === b[k]);
}
