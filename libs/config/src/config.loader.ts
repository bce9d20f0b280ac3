import type { z } from 'zod';
import { ConfigError, showValue, type ConfigProblem } from './config.error';

/** Environment variables as Node gives them. */
export type Env = Readonly<Record<string, string | undefined>>;

/** T with every nested object and array read-only, as {@link loadConfig} returns it. */
export type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends readonly (infer U)[]
    ? readonly DeepReadonly<U>[]
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

/**
 * Validates `env` against `schema` once and returns the result deep-frozen. On any failure it
 * throws a {@link ConfigError} naming every bad variable with its value (secrets redacted) and
 * the reason. This module is the only place that reads `process.env`.
 */
export function loadConfig<S extends z.ZodType>(schema: S, env: Env = process.env): DeepReadonly<z.output<S>> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const problems: ConfigProblem[] = result.error.issues.map((issue) => {
      const variable = issue.path.length > 0 ? issue.path.map(String).join('.') : '(configuration)';
      const raw = issue.path.length === 1 ? env[String(issue.path[0])] : undefined;
      return {
        variable,
        shown: issue.path.length === 1 ? showValue(variable, raw === '' ? undefined : raw) : '(unset)',
        reason: issue.message,
      };
    });
    throw new ConfigError(problems);
  }
  return deepFreeze(result.data) as DeepReadonly<z.output<S>>;
}

/** How {@link loadConfigOrExit} reports; defaults are the real stderr and process.exit. */
export interface ExitOptions {
  env?: Env;
  stderr?: (text: string) => void;
  exit?: (code: number) => never;
}

/**
 * For `main.ts`: {@link loadConfig}, and on a ConfigError print `<app>: <message>` to stderr —
 * every problem, no stack trace — and exit with status 1. Other errors propagate.
 */
export function loadConfigOrExit<S extends z.ZodType>(app: string, schema: S, options: ExitOptions = {}): DeepReadonly<z.output<S>> {
  try {
    return loadConfig(schema, options.env ?? process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    (options.stderr ?? ((text) => process.stderr.write(text)))(`${app}: ${error.message}\n`);
    return (options.exit ?? ((code) => process.exit(code)))(1);
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Reflect.ownKeys(value)) deepFreeze((value as Record<string | symbol, unknown>)[key]);
  }
  return value;
}
