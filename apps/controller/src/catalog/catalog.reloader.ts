import { readFile } from 'node:fs/promises';
import { Catalog, diffCatalogs, loadCatalog } from '@llmgw/catalog';
import { DomainError, ErrorCode } from '@llmgw/domain';
import type { CatalogRepository } from '@llmgw/store';
import type { Logger } from 'pino';

/** The catalog in force and the store revision it came from. Immutable. */
export interface CurrentCatalog {
  readonly catalog: Catalog;
  readonly revision: number;
}

/** A stored revision that could not become a Catalog, kept for operators and metrics. */
export interface RejectedRevision {
  readonly revision: number;
  readonly error: string;
}

/** How far back a start looks for a valid revision when the newest is invalid. */
const START_LOOKBACK = 20;

/**
 * Holds the current catalog and follows the store. The catalog is swapped by reference: a reader
 * takes `current()` once and finishes against that object, whatever happens meanwhile. A stored
 * revision that fails validation never replaces the current catalog; it is logged at error level
 * once and reported by `rejected()`. "No catalog" (nothing stored or nothing valid) is undefined,
 * which the reconciler treats as "decide nothing", never as an empty catalog that would tear
 * every replica down.
 */
export class CatalogReloader {
  private value: CurrentCatalog | undefined;
  private rejectedValue: RejectedRevision | undefined;
  private listener: ((next: CurrentCatalog, previous: CurrentCatalog | undefined) => void) | undefined;

  constructor(
    private readonly store: Pick<CatalogRepository, 'current' | 'currentRevision' | 'get' | 'history' | 'put'>,
    private readonly logger: Logger,
  ) {}

  current(): CurrentCatalog | undefined {
    return this.value;
  }

  /** The newest stored revision that was refused, while it is still the newest. */
  rejected(): RejectedRevision | undefined {
    return this.rejectedValue;
  }

  onSwap(listener: (next: CurrentCatalog, previous: CurrentCatalog | undefined) => void): void {
    this.listener = listener;
  }

  /**
   * At start: seeds the store from `file` when it holds no catalog (exactly one of several
   * controllers starting together wins the seed), then loads the newest valid revision.
   * A file that does not validate throws, naming the file and every problem.
   */
  async start(file: string | undefined): Promise<void> {
    if (file !== undefined && (await this.store.currentRevision()) === 0) {
      const text = await readFile(file, 'utf8');
      let catalog: Catalog;
      try {
        catalog = loadCatalog(text, file.endsWith('.json') ? 'json' : 'yaml');
      } catch (error) {
        throw new Error(`catalog file ${file}: ${(error as Error).message}`);
      }
      try {
        const stored = await this.store.put(catalog.toSpec(), `controller seed from ${file}`, 0);
        this.logger.info({ revision: stored.revision, file, models: catalog.models.length }, 'catalog store seeded from file');
      } catch (error) {
        if (!(error instanceof DomainError && error.code === ErrorCode.Conflict)) throw error;
        this.logger.info({ file }, 'catalog store was seeded by someone else first; using the stored catalog');
      }
    } else if (file !== undefined) {
      this.logger.info({ file }, 'the store already holds a catalog; the catalog file is not used');
    }
    await this.loadNewestValid();
  }

  /**
   * Swaps in a newer stored revision if there is one (a cheap revision query otherwise). An
   * invalid one keeps the current catalog. Returns true when the catalog changed.
   */
  async poll(): Promise<boolean> {
    const newest = await this.store.currentRevision();
    if (newest === 0 || newest === this.value?.revision || newest === this.rejectedValue?.revision) return false;
    const stored = await this.store.get(newest);
    if (!stored) return false;
    const catalog = this.validate(stored.revision, stored.document);
    if (!catalog) return false;
    this.swap({ catalog, revision: stored.revision });
    return true;
  }

  private async loadNewestValid(): Promise<void> {
    const newest = await this.store.current();
    if (!newest) {
      this.logger.warn('no catalog in the store yet: nothing will be placed or removed until one is stored');
      return;
    }
    const first = this.validate(newest.revision, newest.document);
    if (first) {
      this.swap({ catalog: first, revision: newest.revision });
      return;
    }
    for (const h of await this.store.history(START_LOOKBACK)) {
      if (h.revision >= newest.revision) continue;
      const stored = await this.store.get(h.revision);
      const catalog = stored && this.validate(stored.revision, stored.document, false);
      if (catalog) {
        this.logger.error({ revision: h.revision, newest: newest.revision }, 'using the newest valid catalog revision instead');
        this.swap({ catalog, revision: h.revision });
        return;
      }
    }
    this.logger.error({ newest: newest.revision }, 'no valid catalog revision in the store: nothing will be placed or removed');
  }

  private validate(revision: number, document: unknown, remember = true): Catalog | undefined {
    try {
      return Catalog.create(document);
    } catch (error) {
      const message = (error as Error).message;
      if (remember) this.rejectedValue = { revision, error: message };
      this.logger.error(
        { revision, current: this.value?.revision, problems: message.split('\n').slice(1) },
        `stored catalog revision ${revision} is invalid; keeping ${this.value ? `revision ${this.value.revision}` : 'no catalog'}`,
      );
      return undefined;
    }
  }

  private swap(next: CurrentCatalog): void {
    const previous = this.value;
    this.value = next;
    this.rejectedValue = undefined;
    const diff = diffCatalogs(previous?.catalog, next.catalog);
    this.logger.info({ revision: next.revision, previous: previous?.revision, ...diff }, 'catalog swapped');
    this.listener?.(next, previous);
  }
}
