import type { Model, Profile } from '@llmgw/domain';
import { cacheName } from './cache-name';
import { CatalogError } from './catalog.error';
import { validateCatalogSpec, type CatalogSpec, type ModelSpec, type ProfileSpec } from './catalog-spec.validator';
import { deepFreeze } from './spec-values';

/**
 * A validated, immutable set of models. `Catalog.create` is the only way to get one: it refuses
 * an invalid document with a `CatalogError` listing every problem. The object and everything it
 * holds are frozen; a new catalog replaces the current one by swapping the reference.
 */
export class Catalog {
  /** Models in document order, normalised (sizes in bytes, defaults filled). */
  readonly models: readonly Model[];
  /** Name and every alias → model; private so no one can add to it. */
  readonly #byName: ReadonlyMap<string, Model>;
  readonly #wanted: readonly string[];

  private constructor(models: readonly Model[]) {
    this.models = deepFreeze([...models]);
    const byName = new Map<string, Model>();
    for (const m of this.models) {
      byName.set(m.name, m);
      for (const a of m.aliases) byName.set(a, m);
    }
    this.#byName = byName;
    const wanted = new Set<string>();
    for (const m of this.models) {
      const name = cacheName(m.source);
      if (name !== undefined) wanted.add(name);
    }
    this.#wanted = Object.freeze([...wanted].sort());
    Object.freeze(this);
  }

  /**
   * Validates a parsed catalog document (see `CatalogSpec`) and returns the frozen catalog, or
   * throws `CatalogError` (code `InvalidArgument`) with every problem and its path.
   */
  static create(spec: unknown): Catalog {
    const { models, problems } = validateCatalogSpec(spec);
    if (problems.length > 0) throw new CatalogError(problems);
    return new Catalog(models);
  }

  /** The model served under this name or alias; O(1). Names are case-sensitive. */
  get(nameOrAlias: string): Model | undefined {
    return typeof nameOrAlias === 'string' ? this.#byName.get(nameOrAlias) : undefined;
  }

  has(nameOrAlias: string): boolean {
    return this.get(nameOrAlias) !== undefined;
  }

  /**
   * Cache names of every model's weights (every model in the catalog, scaled to zero or not;
   * `file://` sources have none). Anything else in a cache is not wanted. A fresh set per call.
   */
  wantedCacheNames(): ReadonlySet<string> {
    return new Set(this.#wanted);
  }

  /** A plain JSON document that `Catalog.create` turns back into an equal catalog. */
  toSpec(): CatalogSpec {
    return { models: this.models.map(modelToSpec) };
  }
}

/** Models whose name appears only in `next` (added), only in `old` (removed), or in both with any difference (changed). Sorted. */
export function diffCatalogs(
  old: Catalog | undefined,
  next: Catalog,
): { added: string[]; removed: string[]; changed: string[] } {
  const before = new Map((old?.models ?? []).map((m) => [m.name, m]));
  const after = new Map(next.models.map((m) => [m.name, m]));
  const added: string[] = [];
  const removed: string[] = [];
  const changed: string[] = [];
  for (const [name, m] of after) {
    const was = before.get(name);
    if (!was) added.push(name);
    else if (was !== m && JSON.stringify(modelToSpec(was)) !== JSON.stringify(modelToSpec(m))) changed.push(name);
  }
  for (const name of before.keys()) if (!after.has(name)) removed.push(name);
  return { added: added.sort(), removed: removed.sort(), changed: changed.sort() };
}

function modelToSpec(m: Model): ModelSpec {
  return {
    name: m.name,
    aliases: [...m.aliases],
    source: m.source,
    size: m.sizeBytes,
    ...(m.sha256 !== undefined ? { sha256: m.sha256 } : {}),
    replicas: { min: m.replicas.min, max: m.replicas.max },
    ...(m.metrics !== undefined
      ? {
          metrics: {
            ...(m.metrics.running !== undefined ? { running: m.metrics.running } : {}),
            ...(m.metrics.waiting !== undefined ? { waiting: m.metrics.waiting } : {}),
            ...(m.metrics.kvUsage !== undefined ? { kvUsage: [...m.metrics.kvUsage] } : {}),
            ...(m.metrics.modelLabel !== undefined ? { modelLabel: m.metrics.modelLabel } : {}),
          },
        }
      : {}),
    ...(m.endpoints !== undefined ? { endpoints: [...m.endpoints] } : {}),
    ...(m.firstByteTimeoutMs !== undefined ? { firstByteTimeout: `${m.firstByteTimeoutMs}ms` } : {}),
    ...(m.stallTimeoutMs !== undefined ? { stallTimeout: `${m.stallTimeoutMs}ms` } : {}),
    ...(m.routing !== undefined ? { routing: { policy: m.routing.policy, ...(m.routing.prefixAffinity !== undefined ? { prefixAffinity: { ...m.routing.prefixAffinity } } : {}) } } : {}),
    profiles: m.profiles.map(profileToSpec),
  };
}

function profileToSpec(p: Profile): ProfileSpec {
  return {
    engine: p.engine,
    ...(p.gpuClass !== undefined ? { gpuClass: p.gpuClass } : {}),
    gpusPerNode: p.gpusPerNode,
    nodes: p.nodes,
    tensorParallel: p.tensorParallel,
    pipelineParallel: p.pipelineParallel,
    ...(p.memoryPerGpuBytes > 0 ? { memoryPerGpu: p.memoryPerGpuBytes } : {}),
    ...(p.memoryBytes > 0 ? { memory: p.memoryBytes } : {}),
    ...(p.contextLength !== undefined ? { contextLength: p.contextLength } : {}),
    ...(p.parallel !== undefined ? { parallel: p.parallel } : {}),
    args: [...p.args],
    env: Object.fromEntries(Object.entries(p.env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    ...(p.endpoints !== undefined ? { endpoints: [...p.endpoints] } : {}),
  };
}
