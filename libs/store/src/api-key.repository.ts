import { DomainError, ErrorCode, type Clock, type KeyLimits } from '@llmgw/domain';
import type { SqlExecutor } from './database.client';
import { int, json, optionalInt } from './row.mapper';

/** An API key as stored: never its secret, only the secret's SHA-256 (hex). */
export interface ApiKeyRecord {
  readonly name: string;
  readonly owner: string;
  readonly models: readonly string[];
  readonly limits: KeyLimits;
  readonly expiresAt?: number;
  readonly secretHash: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly revokedAt?: number;
  /** Counts the key's changes, from 1 at creation. */
  readonly revision: number;
}

/** The fields a key's owner may change. */
export interface ApiKeyFields {
  readonly owner: string;
  readonly models: readonly string[];
  readonly limits: KeyLimits;
  readonly expiresAt?: number;
}

const COLUMNS = 'name, owner, models, limits, expires_at, secret_hash, created_at, updated_at, revoked_at, revision';

/** API keys on SQLite and PostgreSQL (one SQL text each). */
export class TypeormApiKeyRepository {
  constructor(
    private readonly db: SqlExecutor,
    private readonly clock: Clock,
  ) {}

  /** Stores a new key; a name (or secret hash) already taken, revoked keys included, is a Conflict. */
  async create(name: string, fields: ApiKeyFields, secretHash: string): Promise<ApiKeyRecord> {
    const now = this.clock.now();
    const { rows } = await this.db.query(
      `INSERT INTO api_keys (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, NULL, 1) ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
      [name, fields.owner, JSON.stringify(fields.models), JSON.stringify(fields.limits), fields.expiresAt ?? null, secretHash, now],
    );
    if (rows.length !== 1) throw new DomainError(ErrorCode.Conflict, `an API key named '${name}' exists already (revoked keys keep their names)`);
    return toKey(rows[0]);
  }

  async get(name: string): Promise<ApiKeyRecord | undefined> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM api_keys WHERE name = $1`, [name]);
    return rows.length === 1 ? toKey(rows[0]) : undefined;
  }

  /** Every key, revoked ones included, by name. */
  async list(): Promise<ApiKeyRecord[]> {
    const { rows } = await this.db.query(`SELECT ${COLUMNS} FROM api_keys ORDER BY name`);
    return rows.map(toKey);
  }

  /**
   * Replaces a live key's fields if it is still at `revision`; undefined when it is not (changed
   * meanwhile, revoked or gone: the caller reads it again to say which).
   */
  async update(name: string, fields: ApiKeyFields, revision: number): Promise<ApiKeyRecord | undefined> {
    const { rows } = await this.db.query(
      `UPDATE api_keys SET owner = $2, models = $3, limits = $4, expires_at = $5, updated_at = $6, revision = revision + 1
       WHERE name = $1 AND revision = $7 AND revoked_at IS NULL RETURNING ${COLUMNS}`,
      [name, fields.owner, JSON.stringify(fields.models), JSON.stringify(fields.limits), fields.expiresAt ?? null, this.clock.now(), revision],
    );
    return rows.length === 1 ? toKey(rows[0]) : undefined;
  }

  /** Revokes a key for good; revoking a revoked key changes nothing. Undefined when there is no such key. */
  async revoke(name: string): Promise<ApiKeyRecord | undefined> {
    const now = this.clock.now();
    await this.db.query('UPDATE api_keys SET revoked_at = $2, updated_at = $2, revision = revision + 1 WHERE name = $1 AND revoked_at IS NULL', [name, now]);
    return this.get(name);
  }
}

function toKey(row: Record<string, unknown>): ApiKeyRecord {
  const expiresAt = optionalInt(row.expires_at, 'api_keys.expires_at');
  const revokedAt = optionalInt(row.revoked_at, 'api_keys.revoked_at');
  return {
    name: String(row.name),
    owner: String(row.owner),
    models: json<string[]>(row.models, 'api_keys.models'),
    limits: json<KeyLimits>(row.limits, 'api_keys.limits'),
    ...(expiresAt !== undefined && { expiresAt }),
    secretHash: String(row.secret_hash),
    createdAt: int(row.created_at, 'api_keys.created_at'),
    updatedAt: int(row.updated_at, 'api_keys.updated_at'),
    ...(revokedAt !== undefined && { revokedAt }),
    revision: int(row.revision, 'api_keys.revision'),
  };
}
