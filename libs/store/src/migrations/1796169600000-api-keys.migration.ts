import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `api_keys`: the keys routers accept, managed over the catalog API. The secret is never stored,
 * only its SHA-256 (unique, so a lookup by hash finds one key). `models` and `limits` are JSON;
 * `expires_at` and `revoked_at` are ms since the epoch or null. A revoked key keeps its row, and
 * its name, for the usage history that names it. `revision` counts the row's changes. The same
 * statements on SQLite and PostgreSQL.
 */
export class ApiKeys1796169600000 implements MigrationInterface {
  readonly name = 'ApiKeys1796169600000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE api_keys (
      name text PRIMARY KEY,
      owner text NOT NULL,
      models text NOT NULL,
      limits text NOT NULL,
      expires_at bigint,
      secret_hash text NOT NULL UNIQUE,
      created_at bigint NOT NULL,
      updated_at bigint NOT NULL,
      revoked_at bigint,
      revision bigint NOT NULL
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE api_keys');
  }
}
