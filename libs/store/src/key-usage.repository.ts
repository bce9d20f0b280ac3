import type { SqlExecutor } from './database.client';
import { int } from './row.mapper';

/** Requests and tokens of one key on one model in one UTC hour. */
export interface KeyUsageRow {
  readonly key: string;
  readonly model: string;
  /** Start of the hour, ms since the epoch. */
  readonly hour: number;
  readonly requests: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

export const HOUR_MS = 3_600_000;

const ADD_SQL = `INSERT INTO key_usage (key_name, model, hour, requests, prompt_tokens, completion_tokens)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (key_name, model, hour) DO UPDATE SET
  requests = key_usage.requests + excluded.requests,
  prompt_tokens = key_usage.prompt_tokens + excluded.prompt_tokens,
  completion_tokens = key_usage.completion_tokens + excluded.completion_tokens`;

/** Token usage per key, model and hour on SQLite and PostgreSQL (one SQL text each). */
export class TypeormKeyUsageRepository {
  constructor(private readonly db: SqlExecutor) {}

  /** Adds reported usage to its hours (each row's `hour` is rounded down to the hour). */
  async add(rows: readonly KeyUsageRow[]): Promise<void> {
    for (const r of rows) {
      await this.db.query(ADD_SQL, [r.key, r.model, r.hour - (r.hour % HOUR_MS), r.requests, r.promptTokens, r.completionTokens]);
    }
  }

  /** Usage from the hour holding `since` on, of one key or of all, oldest hour first. */
  async query(since: number, key?: string): Promise<KeyUsageRow[]> {
    const from = since - (since % HOUR_MS);
    const { rows } =
      key === undefined
        ? await this.db.query('SELECT * FROM key_usage WHERE hour >= $1 ORDER BY hour, key_name, model', [from])
        : await this.db.query('SELECT * FROM key_usage WHERE hour >= $1 AND key_name = $2 ORDER BY hour, key_name, model', [from, key]);
    return rows.map((r) => ({
      key: String(r.key_name),
      model: String(r.model),
      hour: int(r.hour, 'key_usage.hour'),
      requests: int(r.requests, 'key_usage.requests'),
      promptTokens: int(r.prompt_tokens, 'key_usage.prompt_tokens'),
      completionTokens: int(r.completion_tokens, 'key_usage.completion_tokens'),
    }));
  }
}
