import { DomainError, ErrorCode, type Clock } from '@llmgw/domain';
import type { StoreDatabase } from './database.client';
import { int, optionalText } from './row.mapper';
import { EVENT_KINDS, type EventKind, type EventQuery, type EventRepository, type NewEvent, type StoredEvent } from './store.ports';

/** Events kept unless configured otherwise. */
export const DEFAULT_EVENT_RETENTION = 10_000;

/** Deletes everything older than the newest $1 events (nothing while there are fewer). */
const PRUNE_SQL = `DELETE FROM events WHERE id <= (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET $1)`;

/** {@link EventRepository} on SQLite and PostgreSQL: each insert prunes to the newest `retention` events in its transaction. */
export class TypeormEventRepository implements EventRepository {
  constructor(
    private readonly db: StoreDatabase,
    private readonly clock: Clock,
    readonly retention = DEFAULT_EVENT_RETENTION,
  ) {
    if (!Number.isSafeInteger(retention) || retention < 1) {
      throw new DomainError(ErrorCode.InvalidArgument, `event retention must be a positive integer, got ${retention}`, [
        { path: 'eventRetention', message: `must be a positive integer, got ${retention}` },
      ]);
    }
  }

  async record(event: NewEvent): Promise<StoredEvent> {
    if (!(EVENT_KINDS as readonly string[]).includes(event.kind)) {
      throw new DomainError(ErrorCode.InvalidArgument, `unknown event kind '${event.kind}'`, [{ path: 'kind', message: `must be one of ${EVENT_KINDS.join(', ')}` }]);
    }
    const time = event.time ?? this.clock.now();
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query(
        'INSERT INTO events (time, kind, model, replica_id, node_id, reason) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id',
        [time, event.kind, event.model ?? null, event.replicaId ?? null, event.nodeId ?? null, event.reason ?? null],
      );
      await tx.query(PRUNE_SQL, [this.retention]);
      return { ...event, id: int(rows[0].id, 'events.id'), time };
    });
  }

  async list(query: EventQuery = {}): Promise<StoredEvent[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const match = (column: string, value: unknown, op = '=') => {
      params.push(value);
      where.push(`${column} ${op} $${params.length}`);
    };
    if (query.model !== undefined) match('model', query.model);
    if (query.replicaId !== undefined) match('replica_id', query.replicaId);
    if (query.nodeId !== undefined) match('node_id', query.nodeId);
    if (query.beforeId !== undefined) match('id', query.beforeId, '<');
    params.push(query.limit ?? 100);
    const { rows } = await this.db.query(
      `SELECT id, time, kind, model, replica_id, node_id, reason FROM events${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`,
      params,
    );
    return rows.map(toEvent);
  }
}

function toEvent(row: Record<string, unknown>): StoredEvent {
  const optional = (key: string, value: unknown) => {
    const text = optionalText(value);
    return text === undefined ? {} : { [key]: text };
  };
  return {
    id: int(row.id, 'events.id'),
    time: int(row.time, 'events.time'),
    kind: String(row.kind) as EventKind,
    ...optional('model', row.model),
    ...optional('replicaId', row.replica_id),
    ...optional('nodeId', row.node_id),
    ...optional('reason', row.reason),
  };
}
