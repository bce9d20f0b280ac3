import { DomainError, ErrorCode } from '@llmgw/domain';

// Column readers shared by the repositories: PostgreSQL returns bigint as a string and boolean
// as a boolean, SQLite returns numbers for both; every reader gives the same JS value on both.

/** An integer column (bigint ms or integer) as a number; throws on a value that is not one. */
export function int(value: unknown, column: string): number {
  const n = typeof value === 'string' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) {
    throw new DomainError(ErrorCode.Internal, `store: column ${column} holds ${String(value)}, not an integer`);
  }
  return n;
}

/** A nullable integer column: NULL reads as undefined (unknown), never 0. */
export function optionalInt(value: unknown, column: string): number | undefined {
  return value === null || value === undefined ? undefined : int(value, column);
}

/** A nullable text column: NULL reads as undefined. */
export function optionalText(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : String(value);
}

/** A boolean column (PostgreSQL boolean or SQLite 0/1). */
export function bool(value: unknown): boolean {
  return value === true || value === 1 || value === '1' || value === 't';
}

/** A JSON text column. */
export function json<T>(value: unknown, column: string): T {
  try {
    return JSON.parse(String(value)) as T;
  } catch {
    throw new DomainError(ErrorCode.Internal, `store: column ${column} holds invalid JSON`);
  }
}
