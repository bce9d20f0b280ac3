import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';

/** A parser for one variable's text: the typed value, or why the text is refused. */
export type EnvParse<T> = (raw: string) => { ok: true; value: T } | { ok: false; reason: string };

/** A variable that must be set, one with a default, or one that may stay unset (undefined). */
export type VarSpec<T> = { default: T } | { optional: true } | Record<string, never>;

/** The zod type of one environment variable: reads `string | undefined`, yields T. */
export type EnvVar<T> = z.ZodType<T, string | undefined>;

/**
 * Builds the schema for one variable. Unset and empty text both mean "not given": the default
 * applies, an optional variable is undefined, a required one is an error. Any other text must
 * parse — nothing is coerced silently.
 */
export function envVar<T>(parse: EnvParse<T>, spec: { default: T }): EnvVar<T>;
export function envVar<T>(parse: EnvParse<T>, spec: { optional: true }): EnvVar<T | undefined>;
export function envVar<T>(parse: EnvParse<T>, spec?: Record<string, never>): EnvVar<T>;
export function envVar<T>(parse: EnvParse<T>, spec: VarSpec<T> = {}): EnvVar<T | undefined> {
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw === '') {
        if ('default' in spec) return spec.default;
        if ('optional' in spec) return undefined;
        ctx.addIssue({ code: 'custom', message: 'is required' });
        return z.NEVER;
      }
      const parsed = parse(raw);
      if (parsed.ok) return parsed.value;
      ctx.addIssue({ code: 'custom', message: parsed.reason });
      return z.NEVER;
    }) as unknown as EnvVar<T | undefined>;
}

const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
const bad = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/** Parses a TCP port: whole number 0..65535 (0 = let the OS choose). */
export const parsePort: EnvParse<number> = (raw) => {
  if (!/^\d{1,5}$/.test(raw) || Number(raw) > 65_535) return bad('expected a port number 0..65535');
  return ok(Number(raw));
};

/** Parses a whole number in [min, max]. */
export function parseInteger(min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): EnvParse<number> {
  return (raw) => {
    const n = /^-?\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) return bad(`expected a whole number between ${min} and ${max}`);
    return ok(n);
  };
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** Parses a duration into milliseconds: `500ms`, `5s`, `2m`, `1h`, or whole milliseconds (`1500`). */
export const parseDuration: EnvParse<number> = (raw) => {
  const match = /^(\d+)(ms|s|m|h)?$/.exec(raw);
  const ms = match ? Number(match[1]) * DURATION_UNITS_MS[match[2] ?? 'ms'] : Number.NaN;
  if (!Number.isSafeInteger(ms)) return bad('expected a duration such as 500ms, 5s, 2m, 1h or whole milliseconds');
  return ok(ms);
};

/** Parses a boolean: exactly `true`, `false`, `1` or `0`. */
export const parseBoolean: EnvParse<boolean> = (raw) => {
  if (raw === 'true' || raw === '1') return ok(true);
  if (raw === 'false' || raw === '0') return ok(false);
  return bad('expected true, false, 1 or 0');
};

/** Parses an absolute URL, optionally only with one of `protocols` (written with the colon, e.g. `redis:`). */
export function parseUrl(protocols?: readonly string[]): EnvParse<string> {
  return (raw) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return bad('expected an absolute URL');
    }
    if (protocols && !protocols.includes(url.protocol)) return bad(`expected a URL starting ${protocols.join(' or ')}`);
    return ok(raw);
  };
}

/** Parses one of a fixed set of words (exact, case-sensitive). */
export function parseOneOf<const T extends string>(values: readonly T[]): EnvParse<T> {
  return (raw) => ((values as readonly string[]).includes(raw) ? ok(raw as T) : bad(`expected one of ${values.join(', ')}`));
}

/** Parses a host name or IP address to bind or connect to (no scheme, port or path). */
export const parseHost: EnvParse<string> = (raw) => {
  if (!/^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:]*:[0-9a-fA-F:.]*|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$/.test(raw)) {
    return bad('expected a host name or IP address (no scheme, port or path)');
  }
  return ok(raw.startsWith('[') ? raw.slice(1, -1) : raw);
};

/** Parses a file system path; relative paths are resolved against the working directory at boot. */
export const parsePath: EnvParse<string> = (raw) => ok(isAbsolute(raw) ? raw : resolve(raw));

/** Parses a comma-separated list; items are trimmed, an empty item is an error, each item goes through `item`. */
export function parseList<T = string>(item?: EnvParse<T>): EnvParse<T[]> {
  return (raw) => {
    const values: T[] = [];
    const parts = raw.split(',').map((part) => part.trim());
    for (const [index, part] of parts.entries()) {
      if (part === '') return bad(`item ${index + 1} of the comma-separated list is empty`);
      const parsed = item ? item(part) : ok(part as unknown as T);
      if (!parsed.ok) return bad(`item ${index + 1} (${JSON.stringify(part)}): ${parsed.reason}`);
      values.push(parsed.value);
    }
    return ok(values);
  };
}

/** Shortest shared secret (bearer token) accepted: a guessable token is worse than none. */
export const MIN_TOKEN_LENGTH = 16;

/** Words that mark a value copied from an example rather than generated (compared without case). */
const PLACEHOLDER_WORDS = ['change-me', 'changeme', 'change_me', 'replace-me', 'replaceme', 'placeholder', 'example', 'your-token', 'xxxxxxxx'];

/**
 * Parses a shared secret (join, router or admin token): at least {@link MIN_TOKEN_LENGTH} and at
 * most 512 visible ASCII characters, no whitespace, and none of the placeholder words the
 * shipped examples use (`change-me`, `example`, ...), so a copied example value refuses to start.
 */
export const parseToken: EnvParse<string> = (raw) => {
  if (!/^[\x21-\x7e]+$/.test(raw)) return bad('expected visible ASCII characters without whitespace');
  if (raw.length < MIN_TOKEN_LENGTH || raw.length > 512) return bad(`expected ${MIN_TOKEN_LENGTH} to 512 characters (got ${raw.length}); generate one with \`openssl rand -hex 24\``);
  const lower = raw.toLowerCase();
  const word = PLACEHOLDER_WORDS.find((w) => lower.includes(w));
  if (word !== undefined) return bad(`looks like an example placeholder (contains "${word}"); generate a real one with \`openssl rand -hex 24\``);
  return ok(raw);
};

/** Accepts any non-empty text as is. */
export const parseString: EnvParse<string> = (raw) => ok(raw);

/** The output type of a variable built with spec S: `T | undefined` only when optional. */
export type VarOutput<T, S> = S extends { optional: true } ? T | undefined : T;

/** Turns a parser into a builder taking `{ default }`, `{ optional: true }` or nothing (required). */
export function variable<T>(parse: EnvParse<T>) {
  return <S extends VarSpec<T> = Record<string, never>>(spec?: S): EnvVar<VarOutput<T, S>> =>
    envVar(parse, (spec ?? {}) as { default: T }) as EnvVar<VarOutput<T, S>>;
}

/** Builders for environment variables of the common types; each takes `{ default }`, `{ optional: true }` or nothing (required). */
export const env = {
  /** TCP port 0..65535. */
  port: variable(parsePort),
  /** Whole number in [min, max]. */
  integer: <S extends VarSpec<number> = Record<string, never>>(min: number, max: number, spec?: S) =>
    variable(parseInteger(min, max))(spec),
  /** Milliseconds, written `500ms`, `5s`, `2m`, `1h` or whole ms; a default may be text, e.g. `{ default: '10s' }`. */
  duration: <S extends VarSpec<number | string> = Record<string, never>>(spec?: S): EnvVar<VarOutput<number, S>> =>
    envVar(parseDuration, durationSpec(spec)) as EnvVar<VarOutput<number, S>>,
  /** Exactly true, false, 1 or 0. */
  boolean: variable(parseBoolean),
  /** Absolute URL, optionally restricted to some schemes (`['redis:', 'rediss:']`). */
  url: <S extends VarSpec<string> = Record<string, never>>(protocols?: readonly string[], spec?: S) =>
    variable(parseUrl(protocols))(spec),
  /** One of a fixed set of words. */
  oneOf: <const T extends string, S extends VarSpec<T> = Record<string, never>>(values: readonly T[], spec?: S) =>
    variable(parseOneOf(values))(spec),
  /** Host name or IP address. */
  host: variable(parseHost),
  /** Absolute path; a relative one (including the default) resolves against the working directory at boot. */
  path: <S extends VarSpec<string> = Record<string, never>>(spec?: S): EnvVar<VarOutput<string, S>> =>
    envVar(parsePath, (spec && 'default' in spec ? { default: resolve(spec.default) } : (spec ?? {})) as {
      default: string;
    }) as EnvVar<VarOutput<string, S>>,
  /** Comma-separated list, each item parsed by `item` (default: text as is). */
  list: <T = string, S extends VarSpec<T[]> = Record<string, never>>(item?: EnvParse<T>, spec?: S) =>
    variable(parseList(item))(spec),
  /** Any non-empty text. */
  string: variable(parseString),
  /** A shared secret: see {@link parseToken}. */
  token: variable(parseToken),
} as const;

function durationSpec(spec: VarSpec<number | string> | undefined): { default: number } {
  if (spec && 'default' in spec && typeof spec.default === 'string') {
    const parsed = parseDuration(spec.default);
    if (!parsed.ok) throw new Error(`invalid default duration ${JSON.stringify(spec.default)}: ${parsed.reason}`);
    return { default: parsed.value };
  }
  return (spec ?? {}) as { default: number };
}
