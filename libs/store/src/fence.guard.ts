import { DomainError, ErrorCode } from '@llmgw/domain';
import type { Fence } from '@llmgw/lease';
import type { SqlExecutor } from './database.client';

/**
 * The fence check, run first inside a write transaction. A no-op UPDATE on the lease row that
 * matches only while it still has this owner and generation and has not expired: it locks the
 * row (PostgreSQL) or takes the write lock (SQLite), so a takeover cannot commit between the
 * check and the write it guards.
 */
export const FENCE_SQL = `UPDATE leases SET expires_at = expires_at
WHERE name = $1 AND owner = $2 AND generation = $3 AND expires_at > $4`;

/** Throws DomainError `fenced` unless `fence` still holds at `now` (ms). `none` always holds. */
export async function checkFence(tx: SqlExecutor, fence: Fence, now: number): Promise<void> {
  if (fence.kind === 'none') return;
  const { affected } = await tx.query(FENCE_SQL, [fence.lease, fence.owner, fence.generation, now]);
  if (affected !== 1) {
    throw new DomainError(
      ErrorCode.Fenced,
      `lease '${fence.lease}' generation ${fence.generation} is no longer held by ${fence.owner}: write refused`,
    );
  }
}
