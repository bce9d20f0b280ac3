import type { Clock } from '@llmgw/domain';
import type { LeaseRecord, LeaseStore } from '@llmgw/lease';
import type { SqlExecutor } from './database.client';
import { int } from './row.mapper';

/**
 * Acquire and renew: one statement, the same text on SQLite (3.35+) and PostgreSQL. The
 * update applies only when the row is ours or expired; generation grows only when the owner
 * changes. RETURNING yields the row when we hold it afterwards and nothing otherwise, so two
 * racing claimers cannot both win. Parameters: name, owner, expires_at (now + ttl), now.
 */
export const CLAIM_SQL = `INSERT INTO leases (name, owner, generation, expires_at, acquired_at)
VALUES ($1, $2, 1, $3, $4)
ON CONFLICT (name) DO UPDATE SET
  generation = CASE WHEN leases.owner = excluded.owner THEN leases.generation ELSE leases.generation + 1 END,
  acquired_at = CASE WHEN leases.owner = excluded.owner THEN leases.acquired_at ELSE excluded.acquired_at END,
  owner = excluded.owner,
  expires_at = excluded.expires_at
WHERE leases.owner = excluded.owner OR leases.expires_at <= excluded.acquired_at
RETURNING name, owner, generation, expires_at, acquired_at`;

/** Release: the row stays (its generation must keep growing), expired at once so anyone may claim it. */
export const RELEASE_SQL = `UPDATE leases SET expires_at = 0 WHERE name = $1 AND owner = $2`;

/** The lease table behind {@link LeaseStore}, plus a read for status displays. */
export class TypeormLeaseRepository implements LeaseStore {
  constructor(
    private readonly db: SqlExecutor,
    private readonly clock: Clock,
  ) {}

  async claim(name: string, owner: string, now: number, ttlMs: number): Promise<LeaseRecord | undefined> {
    const { rows } = await this.db.query(CLAIM_SQL, [name, owner, now + ttlMs, now]);
    return rows.length === 1 ? toLease(rows[0]) : undefined;
  }

  async release(name: string, owner: string): Promise<void> {
    await this.db.query(RELEASE_SQL, [name, owner]);
  }

  /** The lease row, or undefined if nobody ever claimed it; `held` says whether it is unexpired now. */
  async get(name: string): Promise<(LeaseRecord & { readonly held: boolean }) | undefined> {
    const { rows } = await this.db.query('SELECT name, owner, generation, expires_at, acquired_at FROM leases WHERE name = $1', [name]);
    if (rows.length === 0) return undefined;
    const lease = toLease(rows[0]);
    return { ...lease, held: lease.expiresAt > this.clock.now() };
  }
}

function toLease(row: Record<string, unknown>): LeaseRecord {
  return {
    name: String(row.name),
    owner: String(row.owner),
    generation: int(row.generation, 'leases.generation'),
    expiresAt: int(row.expires_at, 'leases.expires_at'),
    acquiredAt: int(row.acquired_at, 'leases.acquired_at'),
  };
}
