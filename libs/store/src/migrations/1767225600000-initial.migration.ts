import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The first schema: nodes, replicas, catalog revisions, leases and events, identical on SQLite
 * and PostgreSQL except for how the events id is generated. Times are integer ms since the
 * epoch (bigint); JSON values are text; NULL means unknown, never 0.
 */
export class Initial1767225600000 implements MigrationInterface {
  readonly name = 'Initial1767225600000';

  async up(runner: QueryRunner): Promise<void> {
    const sqlite = runner.connection.options.type === 'sqlite';
    const statements = [
      `CREATE TABLE nodes (
        id text PRIMARY KEY,
        address text NOT NULL,
        labels text NOT NULL,
        fabric text,
        hardware text NOT NULL,
        cordoned boolean NOT NULL DEFAULT false,
        state text NOT NULL CHECK (state IN ('healthy', 'unreachable', 'lost')),
        last_seen bigint
      )`,
      `CREATE TABLE replicas (
        id text PRIMARY KEY,
        model text NOT NULL,
        profile_index integer NOT NULL,
        engine text NOT NULL,
        members text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'fetching', 'starting', 'ready', 'draining', 'stopped', 'failed', 'lost')),
        reason text,
        restarts integer NOT NULL DEFAULT 0,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        last_used_at bigint
      )`,
      `CREATE INDEX replicas_model_idx ON replicas (model)`,
      `CREATE TABLE catalog_revisions (
        revision integer PRIMARY KEY CHECK (revision > 0),
        document text NOT NULL,
        author text NOT NULL,
        created_at bigint NOT NULL
      )`,
      `CREATE TABLE leases (
        name text PRIMARY KEY,
        owner text NOT NULL,
        generation integer NOT NULL,
        expires_at bigint NOT NULL,
        acquired_at bigint NOT NULL
      )`,
      `CREATE TABLE events (
        id ${sqlite ? 'integer PRIMARY KEY AUTOINCREMENT' : 'bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY'},
        time bigint NOT NULL,
        kind text NOT NULL,
        model text,
        replica_id text,
        node_id text,
        reason text
      )`,
      `CREATE INDEX events_model_idx ON events (model, id)`,
      `CREATE INDEX events_replica_idx ON events (replica_id, id)`,
      `CREATE INDEX events_node_idx ON events (node_id, id)`,
    ];
    for (const sql of statements) await runner.query(sql);
  }

  async down(runner: QueryRunner): Promise<void> {
    for (const table of ['events', 'leases', 'catalog_revisions', 'replicas', 'nodes']) await runner.query(`DROP TABLE ${table}`);
  }
}
