import { cacheName, type Catalog } from '@llmgw/catalog';
import type { NodeInfo, Replica, ReplicaState } from '@llmgw/domain';
import { allocationsOf, describeProfile, PlacementIndex, planPlacements, type PlacementReason } from '@llmgw/placement';

/** Replica states that hold GPUs and memory; stopped, failed and lost replicas hold nothing. */
const HOLDING_STATES: ReadonlySet<ReplicaState> = new Set(['pending', 'fetching', 'starting', 'ready', 'draining']);

/** Most replicas of one model the preview places; past it the entry says `truncated`. */
export const PREVIEW_MAX_REPLICAS_PER_MODEL = 100;

/** One replica the preview would place: which profile, on which node(s) and GPUs. */
export interface PreviewPlacement {
  profileIndex: number;
  /** e.g. `vllm 2×H100-80GB`, `llamacpp CPU`. */
  profile: string;
  members: { nodeId: string; gpuIndices: number[] }[];
}

/** What the preview says about one model of the candidate catalog. */
export interface ModelPreview {
  model: string;
  /** `replicas.min` of the candidate catalog: what the reconciler keeps running. */
  wanted: number;
  /** Replicas of this name that hold resources in the store now (kept by the reconciler). */
  existing: number;
  /**
   * `satisfied`: existing ≥ wanted (with wanted 0, a first replica would also fit);
   * `fits`: every missing replica was placed; `partial`: some were; `unplaceable`: none was.
   */
  outcome: 'satisfied' | 'fits' | 'partial' | 'unplaceable';
  /** Replicas placed in this preview, in order. With `wanted` 0, the one replica a scale-up would get. */
  placements: PreviewPlacement[];
  /** Why the next replica fits nowhere: a summary line per profile, and every reason. */
  unplaceable?: { summary: string; reasons: PlacementReason[] };
  /** More replicas were missing than the preview places ({@link PREVIEW_MAX_REPLICAS_PER_MODEL}). */
  truncated?: boolean;
}

/** The placement preview of a candidate catalog against the current inventory. */
export interface PlacementPreview {
  /** Nodes considered (every stored node; placement skips unhealthy and cordoned ones with a reason). */
  nodes: number;
  models: ModelPreview[];
}

/**
 * Where the candidate catalog's missing replicas would go on the current inventory, or why not.
 * Replicas of models the candidate keeps hold their GPUs; replicas of models it drops count as
 * freed (the reconciler tears them down). Models are placed in catalog order, each placement
 * taking its resources before the next, as the reconciler would. Pure and deterministic: it
 * predicts, it does not reserve, and the reconciler may decide differently on a changed fleet.
 */
export function previewPlacement(catalog: Catalog, nodes: readonly NodeInfo[], replicas: readonly Replica[]): PlacementPreview {
  const existing = new Map<string, number>();
  // Replicas of a model the candidate drops count as freed: the reconciler tears them down.
  const kept = replicas.filter((r) => HOLDING_STATES.has(r.state) && catalog.get(r.model)?.name === r.model);
  for (const replica of kept) existing.set(replica.model, (existing.get(replica.model) ?? 0) + 1);
  const allocations = allocationsOf(kept, (name) => catalog.get(name), () => true);
  let index = PlacementIndex.build({ nodes, allocations });
  const models: ModelPreview[] = [];
  for (const model of catalog.models) {
    const have = existing.get(model.name) ?? 0;
    const wanted = model.replicas.min;
    const missing = Math.max(0, wanted - have);
    const request = { model, cacheName: cacheName(model.source) };
    const entry: ModelPreview = { model: model.name, wanted, existing: have, outcome: 'satisfied', placements: [] };
    if (missing === 0) {
      // Nothing to place; say whether a first replica would fit, without taking its room.
      if (have === 0) {
        const result = index.place(request);
        if (result.ok) entry.placements.push(toPlacement(model.profiles, result.profileIndex, result.members));
        else entry.unplaceable = { summary: result.summary, reasons: result.reasons };
      }
      models.push(entry);
      continue;
    }
    const attempts = Math.min(missing, PREVIEW_MAX_REPLICAS_PER_MODEL);
    const plan = planPlacements(index, request, attempts, (i) => `preview:${model.name}:${i}`);
    for (const { result } of plan.placed) entry.placements.push(toPlacement(model.profiles, result.profileIndex, result.members));
    if (plan.refused) entry.unplaceable = { summary: plan.refused.summary, reasons: [...plan.refused.reasons] };
    index = plan.index;
    if (missing > attempts && entry.unplaceable === undefined) entry.truncated = true;
    entry.outcome = entry.placements.length === 0 ? 'unplaceable' : entry.unplaceable ? 'partial' : 'fits';
    models.push(entry);
  }
  return { nodes: nodes.length, models };
}

function toPlacement(
  profiles: Catalog['models'][number]['profiles'],
  profileIndex: number,
  members: readonly { nodeId: string; gpuIndices: readonly number[] }[],
): PreviewPlacement {
  return {
    profileIndex,
    profile: describeProfile(profiles[profileIndex]),
    members: members.map((m) => ({ nodeId: m.nodeId, gpuIndices: [...m.gpuIndices] })),
  };
}
