import { cacheName, type Catalog } from '@llmgw/catalog';
import { backoffDelay, type Model, type NodeInfo, type ReplicaMember } from '@llmgw/domain';
import { allocationsOf, fleetCapacity, PlacementIndex, planPlacements, type Allocation, type PlacementReason, type PlacementRequest } from '@llmgw/placement';
import type { NodeEntry } from './node.entry';
import { awaitsRendezvous, GONE_STATES, LIVE_STATES, type ReplicaEntry } from './replica.entry';

/** Why a model has no room, and when it is tried again. */
export interface UnplaceableState {
  readonly reasons: readonly PlacementReason[];
  readonly summary: string;
  /** Failed placement passes in a row. */
  readonly attempts: number;
  /** When it first became unplaceable, ms. */
  readonly since: number;
  /** Not tried again before this (ms) unless the fleet's capacity changed. */
  readonly retryAt: number;
  /** The capacity epoch it was refused at: a new node or freed GPUs allow a retry at once. */
  readonly epoch: number;
}

/** Timing the planner needs; all ms. */
export interface PlanTiming {
  /** Retry delays of a failed replica: the first retry waits the minimum, each later one twice the previous, up to the maximum (backoffDelay). */
  readonly backoffMinMs: number;
  readonly backoffMaxMs: number;
  /** Restarts in place before a failed replica is moved. */
  readonly maxRestarts: number;
  /** How long an agent may take to show a command's effect in its reports before it is sent again. */
  readonly commandGraceMs: number;
}

/** Everything one reconcile pass decides from: a snapshot, never live state. */
export interface PlanInput {
  readonly now: number;
  readonly catalog: Catalog;
  readonly nodes: ReadonlyMap<string, NodeEntry>;
  readonly replicas: ReadonlyMap<string, ReplicaEntry>;
  readonly unplaceable: ReadonlyMap<string, UnplaceableState>;
  /** Model → node → until (ms): nodes a model just failed on, avoided when placing it. */
  readonly avoid: ReadonlyMap<string, ReadonlyMap<string, number>>;
  /** `nodeId/replicaId` → when a stop for that unknown replica was last sent, ms. */
  readonly unknownStops: ReadonlyMap<string, number>;
  /** Grows whenever capacity may have appeared (node joined or came back, replica removed, uncordon). */
  readonly capacityEpoch: number;
  readonly timing: PlanTiming;
  /** A new unique replica id for `model`. */
  newReplicaId(model: string): string;
}

/** One decision. The executor applies them in order, re-checking live state as it goes. */
export type PlanAction =
  | {
      readonly kind: 'place';
      readonly replicaId: string;
      readonly model: string;
      readonly profileIndex: number;
      readonly members: readonly ReplicaMember[];
      /** Member nodes that do not hold the weights yet: FetchWeights goes first there. */
      readonly fetchOn: readonly string[];
    }
  /** Ask the members to stop, then forget the replica once they have. */
  | { readonly kind: 'stop'; readonly replicaId: string; readonly reason: string; readonly event: 'stopped' | 'evicted' }
  /** A stop was sent but not seen through: send it again. */
  | { readonly kind: 'resend-stop'; readonly replicaId: string; readonly nodeIds: readonly string[] }
  /** Remove the record; `lost` = its node is gone (surviving members are told to stop). */
  | { readonly kind: 'forget'; readonly replicaId: string; readonly event: 'stopped' | 'lost'; readonly reason: string }
  /** Failed, backoff over, restarts left: start it again where it is. */
  | { readonly kind: 'restart'; readonly replicaId: string }
  /** Failed too often: stop it and avoid its nodes for this model for a while. */
  | { readonly kind: 'move'; readonly replicaId: string; readonly reason: string; readonly avoidUntil: number }
  /** The agent does not list a replica it was asked to run: send the commands again. */
  | { readonly kind: 'resend-start'; readonly replicaId: string; readonly nodeIds: readonly string[] }
  /** An agent runs a replica nobody placed: stop it there. */
  | { readonly kind: 'stop-unknown'; readonly nodeId: string; readonly replicaId: string; readonly model: string }
  | { readonly kind: 'unplaceable'; readonly model: string; readonly state: UnplaceableState }
  | { readonly kind: 'placeable'; readonly model: string };

const NOT_READY_FIRST: Record<string, number> = { failed: 0, pending: 1, fetching: 2, starting: 3, ready: 4 };

/**
 * Desired versus actual, as a list of actions. Pure and deterministic: the same snapshot gives
 * the same plan (new ids come from `newReplicaId`). Level-triggered: nothing depends on which
 * event caused the pass, so running it twice on the same state plans the same thing again and
 * the executor's effects are idempotent. A model runs `replicas.min` replicas (no autoscaling
 * yet); replicas beyond `replicas.max` are surplus.
 */
export function planReconcile(input: PlanInput): PlanAction[] {
  const { now, catalog, nodes, replicas, timing } = input;
  const actions: PlanAction[] = [];
  const handled = new Set<string>();
  const byModel = new Map<string, ReplicaEntry[]>();
  /** Nodes moved away from in this pass, per model: the replacement avoids them at once. */
  const movedFrom = new Map<string, Set<string>>();

  // 1. Replicas one by one: gone, lost, stopping, orphaned, failed, forgotten by their agent.
  for (const entry of sortedById(replicas)) {
    const r = entry.replica;
    const id = r.id;
    if (GONE_STATES.has(r.state)) {
      actions.push({ kind: 'forget', replicaId: id, event: r.state === 'lost' ? 'lost' : 'stopped', reason: r.reason ?? r.state });
      handled.add(id);
      continue;
    }
    const lostNode = r.members.find((m) => {
      const node = nodes.get(m.nodeId);
      return node === undefined || node.info.state === 'lost';
    });
    if (lostNode) {
      actions.push(
        r.state === 'draining'
          ? { kind: 'forget', replicaId: id, event: 'stopped', reason: entry.stopReason ?? 'stopped' }
          : { kind: 'forget', replicaId: id, event: 'lost', reason: `node ${lostNode.nodeId} lost` },
      );
      handled.add(id);
      continue;
    }
    if (r.state === 'draining') {
      handled.add(id);
      const pending = r.members.filter((m) => !stopConfirmed(entry, nodes.get(m.nodeId) as NodeEntry));
      if (pending.length === 0) {
        actions.push({ kind: 'forget', replicaId: id, event: 'stopped', reason: entry.stopReason ?? 'stopped' });
      } else if (entry.stopSentAt === undefined || now - entry.stopSentAt >= timing.commandGraceMs) {
        const reachable = pending.filter((m) => nodes.get(m.nodeId)?.connected).map((m) => m.nodeId);
        if (reachable.length > 0) actions.push({ kind: 'resend-stop', replicaId: id, nodeIds: reachable });
      }
      continue;
    }
    if (!catalog.has(r.model) || catalog.get(r.model)?.name !== r.model) {
      actions.push({ kind: 'stop', replicaId: id, reason: 'model is no longer in the catalog', event: 'evicted' });
      handled.add(id);
      continue;
    }
    if (r.state === 'failed') {
      const failedAt = entry.failedAt ?? r.updatedAt;
      if (now >= failedAt + backoffDelay(r.restarts + 1, { minMs: timing.backoffMinMs, maxMs: timing.backoffMaxMs })) {
        if (r.restarts < timing.maxRestarts) {
          actions.push({ kind: 'restart', replicaId: id });
        } else {
          actions.push({
            kind: 'move',
            replicaId: id,
            reason: `failed ${r.restarts + 1} times${r.reason ? ` (${r.reason})` : ''}; moving it`,
            avoidUntil: now + timing.backoffMaxMs,
          });
          const set = movedFrom.get(r.model) ?? new Set<string>();
          for (const m of r.members) set.add(m.nodeId);
          movedFrom.set(r.model, set);
          handled.add(id);
          continue;
        }
      }
    } else {
      const forgotten = r.members
        .filter((m) => {
          const node = nodes.get(m.nodeId);
          if (!node || !node.connected || node.reportedAt === undefined || entry.fetching.includes(m.nodeId)) return false;
          // Not sent yet: it waits for rank 0's rendezvous port.
          if (awaitsRendezvous(m, r.members)) return false;
          if (entry.commandSentAt !== undefined && node.reportedAt - entry.commandSentAt < timing.commandGraceMs) return false;
          return !node.reported.has(id);
        })
        .map((m) => m.nodeId);
      if (forgotten.length > 0) actions.push({ kind: 'resend-start', replicaId: id, nodeIds: forgotten });
    }
    const list = byModel.get(r.model);
    if (list) list.push(entry);
    else byModel.set(r.model, [entry]);
  }

  // 2. Replicas agents run that nobody placed (a lost node back, a previous leader's leftovers).
  for (const node of sortedById(nodes)) {
    if (!node.connected) continue;
    for (const reported of node.reported.values()) {
      if (replicas.has(reported.replicaId) || reported.state === 'stopped') continue;
      const key = `${node.info.id}/${reported.replicaId}`;
      const sent = input.unknownStops.get(key);
      if (sent !== undefined && now - sent < timing.commandGraceMs) continue;
      actions.push({ kind: 'stop-unknown', nodeId: node.info.id, replicaId: reported.replicaId, model: reported.model });
    }
  }

  // 3. Model by model: stop surplus and drained replicas, place what is missing.
  let index: PlacementIndex | undefined;
  /** `nodeId/cacheName` fetches planned earlier in this pass: one FetchWeights per file and node. */
  const plannedFetch = new Set<string>();
  const placementIndex = (): PlacementIndex => (index ??= PlacementIndex.build(inventoryOf(nodes, replicas, catalog)));
  for (const model of catalog.models) {
    const live = (byModel.get(model.name) ?? []).filter((e) => LIVE_STATES.has(e.replica.state));
    const onDrained = live.filter((e) => e.replica.members.some((m) => nodes.get(m.nodeId)?.draining));
    const keep = live.filter((e) => !onDrained.includes(e));
    const desired = model.replicas.min;

    const readyKept = keep.filter((e) => e.replica.state === 'ready').length;
    for (const e of onDrained) {
      if (readyKept >= desired) actions.push({ kind: 'stop', replicaId: e.replica.id, reason: 'node drained', event: 'evicted' });
    }
    const surplus = keep.length - model.replicas.max;
    if (surplus > 0) {
      for (const e of [...keep].sort(byEvictionOrder).slice(0, surplus)) {
        actions.push({ kind: 'stop', replicaId: e.replica.id, reason: `surplus: ${keep.length} running, at most ${model.replicas.max} wanted`, event: 'stopped' });
      }
    }

    const known = input.unplaceable.get(model.name);
    const need = desired - keep.length;
    if (need <= 0) {
      if (known) actions.push({ kind: 'placeable', model: model.name });
      continue;
    }
    if (known && now < known.retryAt && known.epoch === input.capacityEpoch) continue;
    const request: PlacementRequest = { model, ...(cacheNameOf(model) !== undefined ? { cacheName: cacheNameOf(model) } : {}) };
    const avoided = activeAvoid(input.avoid.get(model.name), now);
    for (const nodeId of movedFrom.get(model.name) ?? []) avoided.add(nodeId);
    const target = avoided.size > 0 ? PlacementIndex.build(without(placementIndex().inventory, avoided)) : placementIndex();
    const plan = planPlacements(target, request, need, () => input.newReplicaId(model.name));
    const placed = [...plan.placed];
    let refused = plan.refused;
    // Short of room: if the whole fleet could never hold what the model wants, place none of it
    // rather than fill every node and still fall short (`replicas: 1000` on three nodes).
    if (refused) {
      const capacity = fleetCapacity(request, [...nodes.values()].map((n) => n.info), desired);
      if (capacity < desired) {
        placed.length = 0;
        const [, ...details] = refused.summary.split('\n');
        refused = {
          reasons: refused.reasons,
          summary: [
            `model ${model.name}: wants ${desired} replicas, but the fleet (${nodes.size} ${nodes.size === 1 ? 'node' : 'nodes'}) could hold at most ${capacity} even with every node healthy and running nothing else; none placed`,
            ...details,
          ].join('\n'),
        };
      }
    }
    for (const { replicaId, result } of placed) {
      const name = request.cacheName;
      const fetchOn: string[] = [];
      if (name !== undefined) {
        for (const m of result.members) {
          const key = `${m.nodeId}/${name}`;
          if (plannedFetch.has(key) || nodes.get(m.nodeId)?.info.cache.entries.some((e) => e.name === name)) continue;
          plannedFetch.add(key);
          fetchOn.push(m.nodeId);
        }
      }
      actions.push({ kind: 'place', replicaId, model: model.name, profileIndex: result.profileIndex, members: result.members, fetchOn });
      index = placementIndex().withAllocation(replicaId, request, result);
    }
    if (refused) {
      const attempts = (known?.attempts ?? 0) + 1;
      actions.push({
        kind: 'unplaceable',
        model: model.name,
        state: {
          reasons: refused.reasons,
          summary: refused.summary,
          attempts,
          since: known?.since ?? now,
          retryAt: now + backoffDelay(attempts, { minMs: timing.backoffMinMs, maxMs: timing.backoffMaxMs }),
          epoch: input.capacityEpoch,
        },
      });
    } else if (known) {
      actions.push({ kind: 'placeable', model: model.name });
    }
  }
  for (const name of input.unplaceable.keys()) {
    if (!catalog.models.some((m) => m.name === name)) actions.push({ kind: 'placeable', model: name });
  }
  return actions;
}

/** The member's stop is confirmed: its agent reported after the stop was sent and no longer runs it. */
function stopConfirmed(entry: ReplicaEntry, node: NodeEntry): boolean {
  if (entry.memberStates[node.info.id] === 'stopped') return true;
  if (!node.connected || node.reportedAt === undefined || entry.stopSentAt === undefined) return false;
  if (node.reportedAt <= entry.stopSentAt) return false;
  const reported = node.reported.get(entry.replica.id);
  return reported === undefined || reported.state === 'stopped';
}

/**
 * Which surplus replica goes first: ones not serving (failed, then the least advanced), then
 * ready ones longest idle first. A replica whose last use is unknown is never the most idle: it
 * goes after every replica with a known time. Ties end on id.
 */
export function byEvictionOrder(a: ReplicaEntry, b: ReplicaEntry): number {
  const ra = NOT_READY_FIRST[a.replica.state] ?? 5;
  const rb = NOT_READY_FIRST[b.replica.state] ?? 5;
  if (ra !== rb) return ra - rb;
  const ua = a.replica.lastUsedAt;
  const ub = b.replica.lastUsedAt;
  if (ua !== ub) {
    if (ua === undefined) return 1;
    if (ub === undefined) return -1;
    return ua - ub;
  }
  return a.replica.id < b.replica.id ? -1 : a.replica.id > b.replica.id ? 1 : 0;
}

/**
 * The fleet as placement sees it: connected nodes only (a command to any other could not be
 * delivered), and every replica that still holds its GPUs.
 */
export function inventoryOf(
  nodes: ReadonlyMap<string, NodeEntry>,
  replicas: ReadonlyMap<string, ReplicaEntry>,
  catalog: Catalog | undefined,
): { nodes: NodeInfo[]; allocations: Allocation[] } {
  const infos: NodeInfo[] = [];
  for (const n of nodes.values()) if (n.connected) infos.push(n.info);
  const held = [...replicas.values()].map((e) => e.replica);
  return { nodes: infos, allocations: allocationsOf(held, (name) => catalog?.get(name), (state) => !GONE_STATES.has(state)) };
}

const cacheNames = new WeakMap<Model, string | null>();

function cacheNameOf(model: Model): string | undefined {
  let name = cacheNames.get(model);
  if (name === undefined) {
    name = cacheName(model.source) ?? null;
    cacheNames.set(model, name);
  }
  return name ?? undefined;
}

function activeAvoid(avoid: ReadonlyMap<string, number> | undefined, now: number): Set<string> {
  const out = new Set<string>();
  if (avoid) for (const [nodeId, until] of avoid) if (until > now) out.add(nodeId);
  return out;
}

function without(inventory: PlacementIndex['inventory'], nodeIds: ReadonlySet<string>): PlacementIndex['inventory'] {
  return { nodes: inventory.nodes.filter((n) => !nodeIds.has(n.id)), allocations: inventory.allocations };
}

function sortedById<T>(map: ReadonlyMap<string, T>): T[] {
  return [...map.keys()].sort().map((k) => map.get(k) as T);
}
