import { DomainError, ErrorCode } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { parseDatabaseUrl, redactDatabaseUrl } from './database-url.parser';

describe('parseDatabaseUrl', () => {
  it.each([
    ['sqlite:/var/lib/llmgw/llmgw.db', { kind: 'sqlite', path: '/var/lib/llmgw/llmgw.db' }],
    ['sqlite:data/llmgw.db', { kind: 'sqlite', path: 'data/llmgw.db' }],
    ['sqlite:///var/lib/llmgw/llmgw.db', { kind: 'sqlite', path: '/var/lib/llmgw/llmgw.db' }],
    ['sqlite::memory:', { kind: 'sqlite', path: ':memory:' }],
    ['postgres://llmgw:s3cret@db.internal:6543/llmgw', { kind: 'postgres', url: 'postgres://llmgw:s3cret@db.internal:6543/llmgw', host: 'db.internal', port: 6543, database: 'llmgw', user: 'llmgw' }],
    ['postgresql://db/llmgw', { kind: 'postgres', url: 'postgresql://db/llmgw', host: 'db', port: 5432, database: 'llmgw' }],
  ])('%s', (url, expected) => {
    expect(parseDatabaseUrl(url)).toEqual(expected);
  });

  it.each([
    ['', /must not be empty/],
    ['  sqlite:x.db', /spaces/],
    ['sqlite:', /needs a file path/],
    ['mysql://db/llmgw', /must start with sqlite: or postgres:\/\//],
    ['/var/lib/llmgw.db', /must start with/],
    ['postgres://user:hunter2@db:5432/', /database name/],
    ['postgres://user:hunter2@db:5432/a/b', /database name/],
    ['postgres://user:hunter2@db:99999/llmgw', /not a valid URL/],
  ])('refuses %j with a clear error naming the variable, never the password', (url, message) => {
    try {
      parseDatabaseUrl(url);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(DomainError);
      const e = error as DomainError;
      expect(e.code).toBe(ErrorCode.InvalidArgument);
      expect(e.message).toMatch(message);
      expect(e.message).toMatch(/^LLMGW_DATABASE_URL: /);
      expect(e.problems[0].path).toBe('LLMGW_DATABASE_URL');
      expect(e.message).not.toContain('hunter2');
    }
  });

  it('redacts passwords only', () => {
    expect(redactDatabaseUrl('postgres://u:p@h/d')).toBe('postgres://u:***@h/d');
    expect(redactDatabaseUrl('postgres://u@h/d')).toBe('postgres://u@h/d');
    expect(redactDatabaseUrl('sqlite:/a:b@c')).toBe('sqlite:/a:b@c');
  });
});
