import { DomainError, ErrorCode } from '@llmgw/domain';

/** Where the store lives, parsed from an `LLMGW_DATABASE_URL` value. */
export type DatabaseLocation =
  | { readonly kind: 'sqlite'; /** File path as given (relative to the working directory), or `:memory:`. */ readonly path: string }
  | {
      readonly kind: 'postgres';
      /** The URL as given, for the driver (it carries any password). */
      readonly url: string;
      readonly host: string;
      readonly port: number;
      readonly database: string;
      readonly user?: string;
    };

/** `url` with any password replaced by `***`, safe for logs and error messages. */
export function redactDatabaseUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@]*:)[^@/]*@/i, '$1***@');
}

/**
 * Parses `sqlite:<path>` (a file, created if absent; `sqlite::memory:` for a private in-memory
 * database) or `postgres://[user[:password]@]host[:port]/database` (`postgresql://` too).
 * Throws DomainError `invalid_argument` naming `source` and the (redacted) value otherwise.
 */
export function parseDatabaseUrl(url: string, source = 'LLMGW_DATABASE_URL'): DatabaseLocation {
  const fail = (message: string): never => {
    const shown = redactDatabaseUrl(url);
    throw new DomainError(ErrorCode.InvalidArgument, `${source}: ${message} (got '${shown}')`, [{ path: source, message: `${message} (got '${shown}')` }]);
  };
  if (typeof url !== 'string' || url.trim() === '') fail('must not be empty: use sqlite:<path> or postgres://user@host:port/database');
  if (url !== url.trim()) fail('must not start or end with spaces');
  if (url.startsWith('sqlite:')) {
    let path = url.slice('sqlite:'.length);
    if (path.startsWith('//')) path = path.slice(2); // sqlite:///abs/path → /abs/path
    if (path === '') fail('sqlite: needs a file path, e.g. sqlite:/var/lib/llmgw/llmgw.db');
    if (path.includes('\0')) fail('the file path contains a NUL character');
    return { kind: 'sqlite', path };
  }
  if (/^postgres(ql)?:\/\//i.test(url)) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return fail('is not a valid URL');
    }
    if (parsed.hostname === '') fail('postgres URL needs a host');
    const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
    if (database === '' || database.includes('/')) fail('postgres URL needs exactly one database name in its path, e.g. postgres://llmgw@db:5432/llmgw');
    const port = parsed.port === '' ? 5432 : Number(parsed.port);
    return {
      kind: 'postgres',
      url,
      host: parsed.hostname,
      port,
      database,
      user: parsed.username === '' ? undefined : decodeURIComponent(parsed.username),
    };
  }
  return fail('must start with sqlite: or postgres://');
}
