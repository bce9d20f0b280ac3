// The admin API's JSON shapes (documented in apps/controller/README.md) and the pure functions
// that build them from a snapshot of the controller's state. Absent values are omitted, never 0.
// The shapes themselves live in @llmgw/domain (admin-api.ts), shared with apps/ctl.
import type { Catalog } from '@llmgw/catalog';
import {
  engineUrl,
  NODE_STATES,
  REPLICA_STATES,
  type NodeState,
  type NodeView,
  type ReplicaState,
  type ReplicaView,
  type StatusView,
} from '@llmgw/domain';
import { capacityByClass, freeNodesByFabric } from '@llmgw/placement';
import { inventoryOf, LIVE_STATES, type NodeEntry, type ReplicaEntry, type UnplaceableState } from '@llmgw/control';

/** Everything the views read, taken once per request. */
export interface AdminState {
  readonly now: number;
  readonly nodes: ReadonlyMap<string, NodeEntry>;
  readonly replicas: ReadonlyMap<string, ReplicaEntry>;
  readonly catalog?: Catalog;
  readonly unplaceable: ReadonlyMap<string, UnplaceableState>;
}

export function nodeView(n: NodeEntry, replicas: ReadonlyMap<string, ReplicaEntry>): NodeView {
  const holders = new Map<number, string>();
  const here: string[] = [];
  for (const e of replicas.values()) {
    for (const m of e.replica.members) {
      if (m.nodeId !== n.info.id) continue;
      here.push(e.replica.id);
      if (LIVE_STATES.has(e.replica.state) || e.replica.state === 'draining') for (const g of m.gpuIndices) holders.set(g, e.replica.id);
    }
  }
  return {
    id: n.info.id,
    address: n.info.address,
    state: n.info.state,
    cordoned: n.info.cordoned,
    draining: n.draining,
    connected: n.connected,
    ...(n.lastSeen !== undefined ? { lastSeen: n.lastSeen } : {}),
    ...(n.info.fabric !== undefined ? { fabric: n.info.fabric } : {}),
    labels: { ...n.info.labels },
    cpuCores: n.info.cpuCores,
    memoryBytes: n.info.memoryBytes,
    gpus: n.info.gpus.map((g) => ({ ...g, ...(holders.has(g.index) ? { replicaId: holders.get(g.index) } : {}) })),
    cache: {
      dir: n.info.cache.dir,
      ...(n.cacheTotalBytes !== undefined ? { totalBytes: n.cacheTotalBytes } : {}),
      ...(n.cacheFreeBytes !== undefined ? { freeBytes: n.cacheFreeBytes } : {}),
      entries: n.info.cache.entries.length,
    },
    ...(n.agentVersion !== undefined ? { agentVersion: n.agentVersion } : {}),
    replicas: here.sort(),
  };
}

export function replicaView(e: ReplicaEntry, nodes: ReadonlyMap<string, NodeEntry>, now: number): ReplicaView {
  const r = e.replica;
  const leader = r.members.find((m) => m.rank === 0);
  const address = leader ? nodes.get(leader.nodeId)?.info.address : undefined;
  return {
    id: r.id,
    model: r.model,
    profileIndex: r.profileIndex,
    engine: r.engine,
    state: r.state,
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    restarts: r.restarts,
    members: r.members.map((m) => ({ nodeId: m.nodeId, rank: m.rank, gpuIndices: [...m.gpuIndices], ...(m.port !== undefined ? { port: m.port } : {}) })),
    ...(leader?.port !== undefined && address !== undefined ? { url: engineUrl(address, leader.port) } : {}),
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    ...(r.lastUsedAt !== undefined ? { lastUsedAt: r.lastUsedAt, idleSeconds: Math.max(0, Math.floor((now - r.lastUsedAt) / 1000)) } : {}),
  };
}

/** The status summary: the same state the tables show, aggregated. */
export function statusView(s: AdminState, controller: StatusView['controller']): StatusView {
  const nodeCounts = Object.fromEntries(NODE_STATES.map((k) => [k, 0])) as Record<NodeState, number>;
  let cordoned = 0;
  for (const n of s.nodes.values()) {
    nodeCounts[n.info.state] += 1;
    if (n.info.cordoned) cordoned += 1;
  }
  const byState = Object.fromEntries(REPLICA_STATES.map((k) => [k, 0])) as Record<ReplicaState, number>;
  const liveByModel = new Map<string, number>();
  const idle: StatusView['idle'] = { replicas: [], unknown: 0 };
  for (const e of s.replicas.values()) {
    const r = e.replica;
    byState[r.state] += 1;
    if (LIVE_STATES.has(r.state)) liveByModel.set(r.model, (liveByModel.get(r.model) ?? 0) + 1);
    if (r.state !== 'ready') continue;
    if (r.lastUsedAt === undefined) idle.unknown += 1;
    else idle.replicas.push({ replicaId: r.id, model: r.model, ...(r.members[0] ? { nodeId: r.members[0].nodeId } : {}), lastUsedAt: r.lastUsedAt, idleSeconds: Math.max(0, Math.floor((s.now - r.lastUsedAt) / 1000)) });
  }
  idle.replicas.sort((a, b) => a.lastUsedAt - b.lastUsedAt);
  const models = s.catalog?.models ?? [];
  const allNodes = new Map<string, NodeEntry>();
  for (const [id, n] of s.nodes) allNodes.set(id, n.connected ? n : { ...n, connected: true });
  const inventory = inventoryOf(allNodes, s.replicas, s.catalog);
  return {
    controller,
    nodes: { total: s.nodes.size, cordoned, ...nodeCounts },
    capacity: capacityByClass(inventory),
    fabrics: freeNodesByFabric(inventory),
    replicas: { total: s.replicas.size, byState },
    models: {
      total: models.length,
      satisfied: models.filter((m) => (liveByModel.get(m.name) ?? 0) >= m.replicas.min).length,
      unplaceable: s.unplaceable.size,
    },
    unplaceable: [...s.unplaceable].map(([model, u]) => ({ model, summary: u.summary, reasons: [...u.reasons], attempts: u.attempts, since: u.since, retryAt: u.retryAt })),
    idle,
  };
}
