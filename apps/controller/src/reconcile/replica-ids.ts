import { randomBytes } from 'node:crypto';

/** Where the reconciler gets the id of each replica it places (owned by the reconciler; wired in the module). */
export interface ReplicaIds {
  /** A new id for a replica of `model`, never handed out before. */
  next(model: string): string;
}

/** Injection token of {@link ReplicaIds}. */
export const REPLICA_IDS = Symbol('llmgw.controller.replica-ids');

/** `<model slug>-<suffix>`: what agents accept as a replica id ([A-Za-z0-9._-], ≤ 128) for a suffix of that alphabet. */
export function replicaId(model: string, suffix: string): string {
  const slug = model.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 48) || 'replica';
  return `${slug}-${suffix}`;
}

/** `<model slug>-<12 random hex>`: unique across controllers and restarts (the production source). */
export const cryptoReplicaIds: ReplicaIds = { next: (model) => replicaId(model, randomBytes(6).toString('hex')) };

/** `<model slug>-000000000001`, `-000000000002`, ...: the same ids on every run, for tests. */
export function sequentialReplicaIds(start = 1): ReplicaIds {
  let n = start;
  return { next: (model) => replicaId(model, (n++).toString(16).padStart(12, '0')) };
}
