import { DomainError, ErrorCode, type Clock } from '@llmgw/domain';
import { isUniqueViolation, type SqlExecutor } from './database.client';
import { int, json } from './row.mapper';
import type { CatalogRepository, CatalogRevision } from './store.ports';

/**
 * Appends revision current + 1 only if the current revision is still $4. The database decides:
 * two writers expecting the same revision both compute the same new one and the primary key
 * lets exactly one of them in. Parameters: document, author, created_at, expected revision.
 */
const PUT_EXPECTED_SQL = `INSERT INTO catalog_revisions (revision, document, author, created_at)
SELECT COALESCE(MAX(revision), 0) + 1, $1, $2, $3 FROM catalog_revisions
HAVING COALESCE(MAX(revision), 0) = $4
RETURNING revision`;

/** Appends revision current + 1 whatever the current one is. */
const PUT_SQL = `INSERT INTO catalog_revisions (revision, document, author, created_at)
SELECT COALESCE(MAX(revision), 0) + 1, $1, $2, $3 FROM catalog_revisions
RETURNING revision`;

/**
 * How often an unconditional put tries before giving up. Each lost try means another writer's
 * revision went in (the race is for the next revision number), so a put fails only when this
 * many others append while it runs: a bound against a broken database, not against contention.
 * It was 5, and six writers racing at once left the last one failing with a conflict it had not
 * asked for (catalog.repository.int.spec, PostgreSQL).
 */
export const PUT_ATTEMPTS = 1_000;

/** {@link CatalogRepository} on SQLite and PostgreSQL. */
export class TypeormCatalogRepository implements CatalogRepository {
  constructor(
    private readonly db: SqlExecutor,
    private readonly clock: Clock,
  ) {}

  async current(): Promise<CatalogRevision | undefined> {
    const { rows } = await this.db.query(
      'SELECT revision, document, author, created_at FROM catalog_revisions ORDER BY revision DESC LIMIT 1',
    );
    return rows.length === 1 ? toRevision(rows[0]) : undefined;
  }

  async currentRevision(): Promise<number> {
    const { rows } = await this.db.query('SELECT COALESCE(MAX(revision), 0) AS revision FROM catalog_revisions');
    return int(rows[0].revision, 'catalog_revisions.revision');
  }

  async get(revision: number): Promise<CatalogRevision | undefined> {
    const { rows } = await this.db.query('SELECT revision, document, author, created_at FROM catalog_revisions WHERE revision = $1', [revision]);
    return rows.length === 1 ? toRevision(rows[0]) : undefined;
  }

  async history(limit = 50): Promise<Omit<CatalogRevision, 'document'>[]> {
    const { rows } = await this.db.query('SELECT revision, author, created_at FROM catalog_revisions ORDER BY revision DESC LIMIT $1', [limit]);
    return rows.map((row) => ({
      revision: int(row.revision, 'catalog_revisions.revision'),
      author: String(row.author),
      createdAt: int(row.created_at, 'catalog_revisions.created_at'),
    }));
  }

  async put(document: unknown, author: string, expectedRevision?: number): Promise<CatalogRevision> {
    if (expectedRevision !== undefined && (!Number.isSafeInteger(expectedRevision) || expectedRevision < 0)) {
      throw new DomainError(ErrorCode.InvalidArgument, `expected revision must be an integer >= 0, got ${expectedRevision}`, [
        { path: 'expectedRevision', message: `must be an integer >= 0, got ${expectedRevision}` },
      ]);
    }
    const text = JSON.stringify(document);
    if (text === undefined) throw new DomainError(ErrorCode.InvalidArgument, 'catalog document is not JSON');
    for (let attempt = 1; ; attempt++) {
      const createdAt = this.clock.now();
      let rows: Record<string, unknown>[];
      try {
        rows =
          expectedRevision === undefined
            ? (await this.db.query(PUT_SQL, [text, author, createdAt])).rows
            : (await this.db.query(PUT_EXPECTED_SQL, [text, author, createdAt, expectedRevision])).rows;
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        if (expectedRevision === undefined && attempt < PUT_ATTEMPTS) continue;
        rows = [];
      }
      if (rows.length === 1) {
        return { revision: int(rows[0].revision, 'catalog_revisions.revision'), document: JSON.parse(text), author, createdAt };
      }
      const current = await this.currentRevision();
      throw new DomainError(
        ErrorCode.Conflict,
        `catalog changed: expected revision ${expectedRevision ?? '(any)'}, current is ${current}; fetch it and apply your change again`,
      );
    }
  }
}

function toRevision(row: Record<string, unknown>): CatalogRevision {
  return {
    revision: int(row.revision, 'catalog_revisions.revision'),
    document: json<unknown>(row.document, 'catalog_revisions.document'),
    author: String(row.author),
    createdAt: int(row.created_at, 'catalog_revisions.created_at'),
  };
}
