import { Catalog, CatalogError, diffCatalogs, type CatalogSpec, type ModelSpec } from '@llmgw/catalog';
import { DomainError, ErrorCode, type Problem } from '@llmgw/domain';
import type { CatalogRepository, CatalogRevision, NodeRepository, ReplicaRepository } from '@llmgw/store';
import type { Logger } from '@llmgw/observability';
import { expectedRevision, stale, type IfMatch } from './entity-tag.parser';
import { ProblemError } from '@llmgw/observability';
import { previewPlacement, type PlacementPreview } from './placement-preview.planner';

/** The store methods the catalog API uses (CONVENTIONS 4): revisions, and the inventory for previews. */
export interface CatalogApiStore {
  readonly catalog: Pick<CatalogRepository, 'current' | 'currentRevision' | 'get' | 'history' | 'put'>;
  readonly nodes: Pick<NodeRepository, 'list'>;
  readonly replicas: Pick<ReplicaRepository, 'list'>;
}

/** The catalog as the API shows it: revision 0 and no models when nothing was ever stored. */
export interface CatalogView {
  revision: number;
  models: ModelSpec[];
}

/** One model and the revision it was read from (or written in). */
export interface ModelView {
  revision: number;
  model: ModelSpec;
}

/** A stored revision without its document; `createdAt` is ISO 8601. */
export interface RevisionSummary {
  revision: number;
  author: string;
  createdAt: string;
  /** True for the newest revision. */
  current: boolean;
}

/** The answer of a dry run: every problem, or the change it would make and where it would land. */
export interface ValidationReport {
  valid: boolean;
  problems: Problem[];
  /** Against the current catalog; only when valid. */
  changes?: { added: string[]; removed: string[]; changed: string[]; currentRevision: number };
  preview?: PlacementPreview;
}

/** Attempts of a single-model write (read, modify, conditional put) before answering 409. */
export const MODEL_WRITE_ATTEMPTS = 5;

/**
 * The catalog API's rules, on a narrow store port. Every write goes through `Catalog.create` (the
 * one validation path) and then a conditional put: nothing invalid is stored, and a write based on
 * a stale revision is refused (412) or, for single-model edits without If-Match, redone on the new
 * revision, so no concurrent update is lost.
 */
export class CatalogApiService {
  private readonly log: Logger;

  constructor(
    private readonly store: CatalogApiStore,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'CatalogApiService' });
  }

  /** The current catalog. */
  async read(): Promise<CatalogView> {
    const current = await this.store.catalog.current();
    return current ? view(current) : { revision: 0, models: [] };
  }

  /** Replaces the whole catalog with `document` (validated); `ifMatch` makes it conditional. */
  async replace(document: unknown, ifMatch: IfMatch, author: string): Promise<CatalogView> {
    const catalog = validate(document);
    const expected = expectedRevision(ifMatch, await this.store.catalog.currentRevision());
    const stored = await this.put(catalog, author, expected, ifMatch);
    return view(stored);
  }

  /** One model by name or alias; 404 when the catalog has none by that name. */
  async getModel(name: string): Promise<ModelView> {
    const current = await this.read();
    const model = findModel(current.models, name);
    if (!model) throw notFound(name, current.revision);
    return { revision: current.revision, model };
  }

  /**
   * Creates or replaces the model `name` with `body` (a model document; its `name` may be left
   * out, and must equal `name` otherwise). Returns the stored model and whether it is new.
   */
  async putModel(name: string, body: unknown, ifMatch: IfMatch, author: string): Promise<ModelView & { created: boolean }> {
    const model = modelBody(name, body) as unknown as ModelSpec;
    return this.editModels(ifMatch, author, (models) => {
      const index = models.findIndex((m) => m.name === name);
      const next = [...models];
      if (index >= 0) next[index] = model;
      else next.push(model);
      return { models: next, index: index >= 0 ? index : next.length - 1, created: index < 0 };
    }).then(({ stored, index, created }) => ({ revision: stored.revision, model: specOf(stored).models[index], created }));
  }

  /** Removes the model `name` (its name, not an alias); 404 when absent. Returns the new revision. */
  async deleteModel(name: string, ifMatch: IfMatch, author: string): Promise<{ revision: number; deleted: string }> {
    const { stored } = await this.editModels(ifMatch, author, (models, revision) => {
      const index = models.findIndex((m) => m.name === name);
      if (index < 0) throw notFound(name, revision, findModel(models, name));
      return { models: models.filter((_, i) => i !== index), index, created: false };
    });
    return { revision: stored.revision, deleted: name };
  }

  /** Dry run of a whole catalog: every problem, or the change against the current catalog and a placement preview. */
  async validate(document: unknown): Promise<ValidationReport> {
    let catalog: Catalog;
    try {
      catalog = Catalog.create(document);
    } catch (error) {
      if (error instanceof CatalogError) return { valid: false, problems: [...error.problems] };
      throw error;
    }
    const [current, nodes, replicas] = await Promise.all([this.store.catalog.current(), this.store.nodes.list(), this.store.replicas.list()]);
    const before = current ? tryCreate(current.document) : undefined;
    const diff = diffCatalogs(before, catalog);
    return {
      valid: true,
      problems: [],
      changes: { ...diff, currentRevision: current?.revision ?? 0 },
      preview: previewPlacement(catalog, nodes, replicas),
    };
  }

  /** Stored revisions, newest first, without documents. */
  async revisions(limit: number): Promise<{ currentRevision: number; revisions: RevisionSummary[] }> {
    const rows = await this.store.catalog.history(limit);
    const newest = rows[0]?.revision ?? (await this.store.catalog.currentRevision());
    return {
      currentRevision: newest,
      revisions: rows.map((r) => ({ revision: r.revision, author: r.author, createdAt: new Date(r.createdAt).toISOString(), current: r.revision === newest })),
    };
  }

  /** One stored revision's document; 404 when there is no such revision. */
  async revision(revision: number): Promise<CatalogView & { author: string; createdAt: string }> {
    const row = await this.store.catalog.get(revision);
    if (!row) throw new ProblemError('not-found', `no catalog revision ${revision}`);
    return { ...view(row), author: row.author, createdAt: new Date(row.createdAt).toISOString() };
  }

  /**
   * Stores revision `revision`'s document again as the newest revision (validated again: a
   * document today's rules refuse is not restored). Returns the new current catalog.
   */
  async restore(revision: number, ifMatch: IfMatch, author: string): Promise<CatalogView & { restoredFrom: number }> {
    const row = await this.store.catalog.get(revision);
    if (!row) throw new ProblemError('not-found', `no catalog revision ${revision}`);
    let catalog: Catalog;
    try {
      catalog = Catalog.create(row.document);
    } catch (error) {
      if (error instanceof CatalogError) {
        throw new ProblemError('invalid-catalog', `revision ${revision} is not a valid catalog under the current rules; it was not restored`, error.problems);
      }
      throw error;
    }
    const expected = expectedRevision(ifMatch, await this.store.catalog.currentRevision());
    const stored = await this.put(catalog, author, expected, ifMatch);
    this.log.info({ revision: stored.revision, restoredFrom: revision, author }, 'catalog revision restored');
    return { ...view(stored), restoredFrom: revision };
  }

  /**
   * Read-modify-write of the model list with a conditional put. With If-Match the edit applies
   * only to a matching revision (412 otherwise, no retry: the client decided on what it saw).
   * Without, a lost race re-reads and re-applies the edit to the newer catalog, up to
   * {@link MODEL_WRITE_ATTEMPTS} times, then answers 409.
   */
  private async editModels(
    ifMatch: IfMatch,
    author: string,
    edit: (models: ModelSpec[], revision: number) => { models: ModelSpec[]; index: number; created: boolean },
  ): Promise<{ stored: CatalogRevision; index: number; created: boolean }> {
    for (let attempt = 1; attempt <= MODEL_WRITE_ATTEMPTS; attempt++) {
      const current = await this.read();
      const expected = expectedRevision(ifMatch, current.revision) ?? current.revision;
      const { models, index, created } = edit(current.models, current.revision);
      const catalog = validate({ models }, index);
      try {
        const stored = await this.store.catalog.put(catalog.toSpec(), author, expected);
        this.log.info({ revision: stored.revision, author, model: models[index]?.name ?? current.models[index]?.name, attempt }, 'catalog model written');
        return { stored, index, created };
      } catch (error) {
        if (!isConflict(error)) throw error;
        if (ifMatch.kind !== 'none') throw stale(`the catalog changed while this write was applied (expected revision ${expected})`, await this.store.catalog.currentRevision());
        this.log.debug({ attempt, expected }, 'catalog model write lost a race; retrying on the new revision');
      }
    }
    throw new ProblemError('conflict', `the catalog kept changing: ${MODEL_WRITE_ATTEMPTS} attempts lost a race with other writers; try again`, [], {
      currentRevision: await this.store.catalog.currentRevision(),
    });
  }

  /** Conditional (or, with no If-Match, unconditional) put; a lost race becomes 412. */
  private async put(catalog: Catalog, author: string, expected: number | undefined, ifMatch: IfMatch): Promise<CatalogRevision> {
    try {
      const stored = await this.store.catalog.put(catalog.toSpec(), author, expected);
      this.log.info({ revision: stored.revision, author, models: catalog.models.length, conditional: ifMatch.kind !== 'none' }, 'catalog stored');
      return stored;
    } catch (error) {
      if (!isConflict(error)) throw error;
      throw stale(`the catalog changed while this write was applied (expected revision ${expected})`, await this.store.catalog.currentRevision());
    }
  }
}

/**
 * `Catalog.create(document)`, or a 422 listing every problem. With `modelIndex`, problems of that
 * model lose their `models[i].` prefix so they read as paths into the one-model body.
 */
function validate(document: unknown, modelIndex?: number): Catalog {
  try {
    return Catalog.create(document);
  } catch (error) {
    if (!(error instanceof CatalogError)) throw error;
    const problems = modelIndex === undefined ? [...error.problems] : error.problems.map((p) => relativeTo(p, modelIndex));
    const n = problems.length;
    throw new ProblemError('invalid-catalog', `${n} problem${n === 1 ? '' : 's'}; nothing was stored`, problems);
  }
}

function relativeTo(problem: Problem, modelIndex: number): Problem {
  const prefix = `models[${modelIndex}]`;
  if (problem.path === prefix) return { path: '', message: problem.message };
  if (problem.path.startsWith(`${prefix}.`)) return { path: problem.path.slice(prefix.length + 1), message: problem.message };
  if (problem.path.startsWith(`${prefix}[`)) return { path: problem.path.slice(prefix.length), message: problem.message };
  return { path: `catalog.${problem.path}`, message: problem.message };
}

/** The model document of a PUT to `/models/{name}`: a mapping whose `name`, when given, is `name`. */
function modelBody(name: string, body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ProblemError('invalid-catalog', 'a model must be a mapping', [
      { path: '', message: `a model must be a mapping (got ${body === null ? 'null' : Array.isArray(body) ? 'a list' : typeof body})` },
    ]);
  }
  const record = body as Record<string, unknown>;
  if (record.name !== undefined && record.name !== name) {
    throw new ProblemError('invalid-catalog', 'the model name in the body differs from the one in the path', [
      { path: 'name', message: `must be ${JSON.stringify(name)} as in the path, or left out (got ${JSON.stringify(record.name)})` },
    ]);
  }
  return { ...record, name };
}

function findModel(models: readonly ModelSpec[], name: string): ModelSpec | undefined {
  return models.find((m) => m.name === name) ?? models.find((m) => m.aliases?.includes(name));
}

function notFound(name: string, revision: number, aliasOf?: ModelSpec): ProblemError {
  const detail = aliasOf
    ? `${JSON.stringify(name)} is an alias of ${JSON.stringify(aliasOf.name)}; name the model itself to change or delete it`
    : `no model ${JSON.stringify(name)} in catalog revision ${revision}`;
  return new ProblemError('not-found', detail);
}

function specOf(row: CatalogRevision): CatalogSpec {
  const doc = row.document as Partial<CatalogSpec> | null;
  return { models: Array.isArray(doc?.models) ? doc.models : [] };
}

function view(row: CatalogRevision): CatalogView {
  return { revision: row.revision, models: specOf(row).models };
}

function tryCreate(document: unknown): Catalog | undefined {
  try {
    return Catalog.create(document);
  } catch {
    return undefined;
  }
}

function isConflict(error: unknown): boolean {
  return error instanceof DomainError && error.code === ErrorCode.Conflict;
}
