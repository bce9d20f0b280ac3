import { describe, expect, it } from 'vitest';
import { toDialect } from './database.client';

describe('toDialect', () => {
  it('keeps PostgreSQL text and parameters as they are', () => {
    expect(toDialect('postgres', 'SELECT $1, $2, $1', [1, true])).toEqual(['SELECT $1, $2, $1', [1, true]]);
  });
  it('turns $n into ? for SQLite, repeating parameters in order of appearance and booleans into 1/0', () => {
    expect(toDialect('sqlite', 'UPDATE t SET a = $2 WHERE b = $1 AND (c IS NULL OR c < $2) AND d = $3', ['x', 5, false])).toEqual([
      'UPDATE t SET a = ? WHERE b = ? AND (c IS NULL OR c < ?) AND d = ?',
      [5, 'x', 5, 0],
    ]);
  });
  it('refuses a placeholder without a parameter', () => {
    expect(() => toDialect('sqlite', 'SELECT $2', [1])).toThrow(/\$2 has no parameter/);
  });
});
