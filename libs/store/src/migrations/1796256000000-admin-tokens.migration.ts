import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `admin_tokens`: admin credentials beyond the bootstrap token, each with its scopes (JSON:
 * `["read"]` or `["read","write"]`). The secret is never stored, only its SHA-256 (unique). A
 * revoked token keeps its row. The same statements on SQLite and PostgreSQL.
 */
export class AdminTokens1796256000000 implements MigrationInterface {
  readonly name = 'AdminTokens1796256000000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE admin_tokens (
      name text PRIMARY KEY,
      scopes text NOT NULL,
      secret_hash text NOT NULL UNIQUE,
      created_at bigint NOT NULL,
      revoked_at bigint
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE admin_tokens');
  }
}
