import { DomainError, ErrorCode, type AdminScope, type Clock } from '@llmgw/domain';
import type { SqlExecutor } from './database.client';
import { int, json, optionalInt } from './row.mapper';

/** An admin token as stored: never its secret, only the secret's SHA-256 (hex). */
export interface AdminTokenRecord {
  readonly name: string;
  readonly scopes: readonly AdminScope[];
  readonly secretHash: string;
  readonly createdAt: number;
  readonly revokedAt?: number;
}

const COLUMNS = 'name, scopes, secret_hash, created_at, revoked_at';

/** Admin tokens on SQLite and PostgreSQL (one SQL text each). */
export class TypeormAdminTokenRepository {
  constructor(
    private readonly db: SqlExecutor,
    private readonly clock: Clock,
  ) {}

  /** Stores a new token; a name or secret hash already taken (revoked tokens included) is a Conflict. */
  async create(name: string, scopes: readonly AdminScope[], secretHash: string): Promise<AdminTokenRecord> {
    const { rows } = await this.db.query(`INSERT INTO admin_tokens (${COLUMNS}) VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`, [
      name,
      JSON.stringify(scopes),
      secretHash,
      this.clock.now(),
    ]);
    if (rows.length !== 1) throw new DomainError(ErrorCode.Conflict, `an admin token named '${name}' exists already (revoked tokens keep their names)`);
    return toToken(rows[0]);
  }

  async list(): Promise<AdminTokenRecord[]> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM admin_tokens ORDER BY name`);
    return rows.map(toToken);
  }

  /** The live (unrevoked) token with this secret hash. */
  async liveByHash(secretHash: string): Promise<AdminTokenRecord | undefined> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE secret_hash = $1 AND revoked_at IS NULL`, [secretHash]);
    return rows.length === 1 ? toToken(rows[0]) : undefined;
  }

  /** Revokes a token for good; undefined when there is no such token. */
  async revoke(name: string): Promise<AdminTokenRecord | undefined> {
    await this.db.query('UPDATE admin_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL', [name, this.clock.now()]);
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE name = $1`, [name]);
    return rows.length === 1 ? toToken(rows[0]) : undefined;
  }
}

function toToken(row: Record<string, unknown>): AdminTokenRecord {
  const revokedAt = optionalInt(row.revoked_at, 'admin_tokens.revoked_at');
  return {
    name: String(row.name),
    scopes: json<AdminScope[]>(row.scopes, 'admin_tokens.scopes'),
    secretHash: String(row.secret_hash),
    createdAt: int(row.created_at, 'admin_tokens.created_at'),
    ...(revokedAt !== undefined && { revokedAt }),
  };
}
