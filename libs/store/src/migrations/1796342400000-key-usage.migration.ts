import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `key_usage`: requests and tokens per API key, model and UTC hour (`hour`: ms since the epoch
 * at the start of the hour), added to as routers report them. The same statements on SQLite and
 * PostgreSQL.
 */
export class KeyUsage1796342400000 implements MigrationInterface {
  readonly name = 'KeyUsage1796342400000';

  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`CREATE TABLE key_usage (
      key_name text NOT NULL,
      model text NOT NULL,
      hour bigint NOT NULL,
      requests bigint NOT NULL,
      prompt_tokens bigint NOT NULL,
      completion_tokens bigint NOT NULL,
      PRIMARY KEY (key_name, model, hour)
    )`);
  }

  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE key_usage');
  }
}
