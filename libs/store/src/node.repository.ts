import { DomainError, ErrorCode, type Gpu, type NodeCache, type NodeState } from '@llmgw/domain';
import type { SqlExecutor } from './database.client';
import { bool, int, json, optionalInt, optionalText } from './row.mapper';
import type { NodeRecord, NodeRepository } from './store.ports';

/** What the `hardware` JSON column holds. */
interface Hardware {
  gpus: Gpu[];
  cpuCores: number;
  memoryBytes: number;
  cache: NodeCache;
}

const COLUMNS = 'id, address, labels, fabric, hardware, cordoned, draining, state, last_seen';

const UPSERT_SQL = `INSERT INTO nodes (id, address, labels, fabric, hardware, cordoned, state, last_seen)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (id) DO UPDATE SET
  address = excluded.address, labels = excluded.labels, fabric = excluded.fabric,
  hardware = excluded.hardware, state = excluded.state, last_seen = excluded.last_seen`;

/** {@link NodeRepository} on SQLite and PostgreSQL (one SQL text each). */
export class TypeormNodeRepository implements NodeRepository {
  constructor(private readonly db: SqlExecutor) {}

  async get(id: string): Promise<NodeRecord | undefined> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM nodes WHERE id = $1`, [id]);
    return rows.length === 1 ? toNode(rows[0]) : undefined;
  }

  async list(): Promise<NodeRecord[]> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM nodes ORDER BY id`);
    return rows.map(toNode);
  }

  async upsert(node: Omit<NodeRecord, 'draining'>): Promise<void> {
    const hardware: Hardware = { gpus: [...node.gpus], cpuCores: node.cpuCores, memoryBytes: node.memoryBytes, cache: node.cache };
    await this.db.query(UPSERT_SQL, [
      node.id,
      node.address,
      JSON.stringify(node.labels),
      node.fabric ?? null,
      JSON.stringify(hardware),
      node.cordoned,
      node.state,
      node.lastSeen ?? null,
    ]);
  }

  async setCordoned(id: string, cordoned: boolean, draining = false): Promise<void> {
    const { affected } = await this.db.query('UPDATE nodes SET cordoned = $2, draining = $3 WHERE id = $1', [id, cordoned, cordoned && draining]);
    if (affected === 0) throw notFound(id);
  }

  async setState(id: string, state: NodeState, lastSeen?: number): Promise<void> {
    const { affected } =
      lastSeen === undefined
        ? await this.db.query('UPDATE nodes SET state = $2 WHERE id = $1', [id, state])
        : await this.db.query('UPDATE nodes SET state = $2, last_seen = $3 WHERE id = $1', [id, state, lastSeen]);
    if (affected === 0) throw notFound(id);
  }

  async remove(id: string): Promise<boolean> {
    const node = await this.db.query('DELETE FROM nodes WHERE id = $1', [id]);
    const credential = await this.db.query('DELETE FROM node_credentials WHERE node_id = $1', [id]);
    return node.affected + credential.affected > 0;
  }

  async credentialHash(id: string): Promise<string | undefined> {
    const { rows } = await this.db.query('SELECT secret_hash FROM node_credentials WHERE node_id = $1', [id]);
    return rows.length === 1 ? String(rows[0].secret_hash) : undefined;
  }

  async bindCredential(id: string, secretHash: string, at: number): Promise<boolean> {
    const { rows } = await this.db.query(
      'INSERT INTO node_credentials (node_id, secret_hash, created_at) VALUES ($1, $2, $3) ON CONFLICT (node_id) DO NOTHING RETURNING node_id',
      [id, secretHash, at],
    );
    return rows.length === 1;
  }

  async releaseCredential(id: string, secretHash: string): Promise<boolean> {
    const { affected } = await this.db.query('DELETE FROM node_credentials WHERE node_id = $1 AND secret_hash = $2', [id, secretHash]);
    return affected > 0;
  }
}

function notFound(id: string): DomainError {
  return new DomainError(ErrorCode.NotFound, `node '${id}' not found`);
}

function toNode(row: Record<string, unknown>): NodeRecord {
  const hardware = json<Hardware>(row.hardware, 'nodes.hardware');
  const fabric = optionalText(row.fabric);
  const lastSeen = optionalInt(row.last_seen, 'nodes.last_seen');
  return {
    id: String(row.id),
    address: String(row.address),
    labels: json<Record<string, string>>(row.labels, 'nodes.labels'),
    ...(fabric === undefined ? {} : { fabric }),
    gpus: hardware.gpus,
    cpuCores: int(hardware.cpuCores, 'nodes.hardware.cpuCores'),
    memoryBytes: int(hardware.memoryBytes, 'nodes.hardware.memoryBytes'),
    cache: hardware.cache,
    state: String(row.state) as NodeState,
    cordoned: bool(row.cordoned),
    draining: bool(row.draining),
    ...(lastSeen === undefined ? {} : { lastSeen }),
  };
}
