import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '@llmgw/config';

export type { Logger } from 'pino';

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  /** Minimum level written. */
  level: LogLevel;
  /** The program, e.g. `llmgw-router`; written as `name` on every line. */
  name: string;
  /** Where lines go (default: stdout). Tests pass a stream that collects them. */
  destination?: DestinationStream;
}

/** Shown instead of a secret's value. */
export const REDACTED = '[redacted]';

/**
 * Keys whose values never reach a log line, at any depth: credentials and session material.
 * Token *counts* (`promptTokens`, `max_tokens`) are not secrets and stay visible.
 */
const SECRET_KEY = /^(authorization|proxy-authorization|cookie|set-cookie)$|passw(or)?d|secret|api[-_]?key|credential|private[-_]?key|token$/i;

/**
 * A pino logger writing one JSON object per line: ISO `time`, `level` as a word, `name`, `msg`,
 * plus whatever fields a call passes. Values under secret-looking keys are replaced by
 * {@link REDACTED}. Make one per process and a `child({ context: ClassName })` per class.
 */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      name: options.name,
      level: options.level,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        log: (object) => redactSecrets(object) as Record<string, unknown>,
      },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/** A copy of `value` with every secret-keyed value replaced; errors, cycles and depth beyond 8 are left alone. */
export function redactSecrets(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (value === null || typeof value !== 'object' || value instanceof Error || depth > 8 || seen.has(value)) return value;
  seen.add(value);
  if (Array.isArray(value)) return value.map((item) => redactSecrets(item, depth + 1, seen));
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] = SECRET_KEY.test(key) && inner !== undefined && inner !== null ? REDACTED : redactSecrets(inner, depth + 1, seen);
  }
  return out;
}
