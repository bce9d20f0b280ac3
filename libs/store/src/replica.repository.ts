import { DomainError, ErrorCode, type Clock, type EngineKind, type Replica, type ReplicaMember, type ReplicaState } from '@llmgw/domain';
import type { Fence } from '@llmgw/lease';
import { isUniqueViolation, type StoreDatabase } from './database.client';
import { checkFence } from './fence.guard';
import { int, json, optionalInt, optionalText } from './row.mapper';
import type { ReplicaChange, ReplicaRepository } from './store.ports';

const COLUMNS = 'id, model, profile_index, engine, members, state, reason, restarts, created_at, updated_at, last_used_at';

/** Rows per multi-row INSERT of placeAll (11 parameters each, far below either database's limit). */
const PLACE_ROWS_PER_STATEMENT = 50;

/** {@link ReplicaRepository} on SQLite and PostgreSQL; fenced writes check the lease in the same transaction. */
export class TypeormReplicaRepository implements ReplicaRepository {
  constructor(
    private readonly db: StoreDatabase,
    private readonly clock: Clock,
  ) {}

  async get(id: string): Promise<Replica | undefined> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM replicas WHERE id = $1`, [id]);
    return rows.length === 1 ? toReplica(rows[0]) : undefined;
  }

  async list(filter: { readonly model?: string } = {}): Promise<Replica[]> {
    const { rows } =
      filter.model === undefined
        ? await this.db.query(`SELECT ${COLUMNS} FROM replicas ORDER BY id`)
        : await this.db.query(`SELECT ${COLUMNS} FROM replicas WHERE model = $1 ORDER BY id`, [filter.model]);
    return rows.map(toReplica);
  }

  async place(replica: Replica, fence: Fence): Promise<void> {
    return this.placeAll([replica], fence);
  }

  /**
   * Stores new replicas in one fenced transaction: all or none, a few rows per statement, so a
   * first pass placing thousands costs a handful of round trips rather than four per replica.
   */
  async placeAll(replicas: readonly Replica[], fence: Fence): Promise<void> {
    if (replicas.length === 0) return;
    try {
      await this.db.transaction(async (tx) => {
        await checkFence(tx, fence, this.clock.now());
        for (let i = 0; i < replicas.length; i += PLACE_ROWS_PER_STATEMENT) {
          const chunk = replicas.slice(i, i + PLACE_ROWS_PER_STATEMENT);
          const params: unknown[] = [];
          const rows = chunk.map((replica) => {
            const at = params.length;
            params.push(
              replica.id,
              replica.model,
              replica.profileIndex,
              replica.engine,
              JSON.stringify(replica.members),
              replica.state,
              replica.reason ?? null,
              replica.restarts,
              replica.createdAt,
              replica.updatedAt,
              replica.lastUsedAt ?? null,
            );
            return `(${Array.from({ length: 11 }, (_, k) => `$${at + k + 1}`).join(', ')})`;
          });
          await tx.query(`INSERT INTO replicas (${COLUMNS}) VALUES ${rows.join(', ')}`, params);
        }
      });
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new DomainError(ErrorCode.Conflict, replicas.length === 1 ? `replica '${replicas[0].id}' already exists` : `one of ${replicas.length} replicas already exists`);
      }
      throw error;
    }
  }

  async update(id: string, change: ReplicaChange, fence: Fence): Promise<Replica> {
    return this.db.transaction(async (tx) => {
      await checkFence(tx, fence, this.clock.now());
      const sets: string[] = ['updated_at = $2'];
      const params: unknown[] = [id, change.updatedAt];
      const set = (column: string, value: unknown) => {
        params.push(value);
        sets.push(`${column} = $${params.length}`);
      };
      if (change.state !== undefined) set('state', change.state);
      if (change.reason !== undefined) set('reason', change.reason);
      if (change.restarts !== undefined) set('restarts', change.restarts);
      if (change.members !== undefined) set('members', JSON.stringify(change.members));
      const { rows } = await tx.query(`UPDATE replicas SET ${sets.join(', ')} WHERE id = $1 RETURNING ${COLUMNS}`, params);
      if (rows.length === 0) throw new DomainError(ErrorCode.NotFound, `replica '${id}' not found`);
      return toReplica(rows[0]);
    });
  }

  async evict(id: string, fence: Fence): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await checkFence(tx, fence, this.clock.now());
      const { affected } = await tx.query('DELETE FROM replicas WHERE id = $1', [id]);
      return affected > 0;
    });
  }

  async recordUsage(usage: ReadonlyMap<string, number>): Promise<number> {
    if (usage.size === 0) return 0;
    return this.db.transaction(async (tx) => {
      let moved = 0;
      for (const [id, at] of usage) {
        const { affected } = await tx.query(
          'UPDATE replicas SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)',
          [id, at],
        );
        moved += affected;
      }
      return moved;
    });
  }

  async listUsage(): Promise<Map<string, number>> {
    const { rows } = await this.db.query('SELECT id, last_used_at FROM replicas WHERE last_used_at IS NOT NULL');
    const usage = new Map<string, number>();
    for (const row of rows) usage.set(String(row.id), int(row.last_used_at, 'replicas.last_used_at'));
    return usage;
  }
}

function toReplica(row: Record<string, unknown>): Replica {
  const reason = optionalText(row.reason);
  const lastUsedAt = optionalInt(row.last_used_at, 'replicas.last_used_at');
  return {
    id: String(row.id),
    model: String(row.model),
    profileIndex: int(row.profile_index, 'replicas.profile_index'),
    engine: String(row.engine) as EngineKind,
    members: json<ReplicaMember[]>(row.members, 'replicas.members'),
    state: String(row.state) as ReplicaState,
    ...(reason === undefined ? {} : { reason }),
    restarts: int(row.restarts, 'replicas.restarts'),
    createdAt: int(row.created_at, 'replicas.created_at'),
    updatedAt: int(row.updated_at, 'replicas.updated_at'),
    ...(lastUsedAt === undefined ? {} : { lastUsedAt }),
  };
}
