import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `node_credentials`: the hash of the secret a node id was bound to at its first join, so that
 * nobody else can connect under that id. One row per node id, kept apart from `nodes` because
 * the binding is made before the node's first report is stored, and it outlives none of it:
 * forgetting a node removes both. Existing nodes have no row and are bound at their next join.
 * The same statements on SQLite and PostgreSQL.
 */
export class NodeCredentials1796083200000 implements MigrationInterface {
  readonly name = 'NodeCredentials1796083200000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE node_credentials (
      node_id text PRIMARY KEY,
      secret_hash text NOT NULL,
      created_at bigint NOT NULL
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE node_credentials');
  }
}
