import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `nodes.draining`: an operator's drain (cordoned, and its replicas moved elsewhere), stored next
 * to `cordoned` so that a restarted or new leader carries it on. Existing rows are not draining.
 * The same statements on SQLite and PostgreSQL.
 */
export class NodeDraining1795996800000 implements MigrationInterface {
  readonly name = 'NodeDraining1795996800000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE nodes ADD COLUMN draining boolean NOT NULL DEFAULT false');
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE nodes DROP COLUMN draining');
  }
}
