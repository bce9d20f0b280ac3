import { readFileSync } from 'node:fs';
import { z } from 'zod';
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
 *
 * Every `*_TOKEN` variable the schema reads may instead be given as `<NAME>_FILE`, a path whose
 * content (less one trailing newline) is the value: see {@link readFileVariables}.
 */
export function loadConfig<S extends z.ZodType>(schema: S, env: Env = process.env): DeepReadonly<z.output<S>> {
  const files = readFileVariables(schema, env);
  const resolved = files.env;
  const result = schema.safeParse(resolved);
  if (!result.success || files.problems.length > 0) {
    const failedFiles = new Set(files.problems.map((p) => p.variable.slice(0, -FILE_SUFFIX.length)));
    const problems: ConfigProblem[] = [...files.problems];
    for (const issue of result.success ? [] : result.error.issues) {
      const variable = issue.path.length > 0 ? issue.path.map(String).join('.') : '(configuration)';
      if (failedFiles.has(variable)) continue; // already reported against its _FILE variable
      const file = issue.path.length === 1 ? files.fromFile.get(variable) : undefined;
      if (file !== undefined) {
        problems.push({ variable: `${variable}${FILE_SUFFIX}`, shown: JSON.stringify(file), reason: `the file's content: ${issue.message}` });
        continue;
      }
      const raw = issue.path.length === 1 ? resolved[String(issue.path[0])] : undefined;
      problems.push({
        variable,
        shown: issue.path.length === 1 ? showValue(variable, raw === '' ? undefined : raw) : '(unset)',
        reason: issue.message,
      });
    }
    throw new ConfigError(problems);
  }
  return deepFreeze(result.data) as DeepReadonly<z.output<S>>;
}

/** Suffix of a variable naming the file that holds another variable's value (`LLMGW_X_TOKEN_FILE`). */
export const FILE_SUFFIX = '_FILE';

/** The variable names a config schema reads: the keys of the `z.object` inside its refinements and transforms. */
export function schemaKeys(schema: z.ZodType): Set<string> {
  const keys = objectKeys(schema);
  if (keys === undefined) throw new Error('schemaKeys: expected a z.object(...) inside the schema');
  return new Set(keys);
}

/**
 * The secrets of `schema` that may be given as `<NAME>_FILE`: every variable it reads whose name
 * ends in `_TOKEN` (none for a schema without a `z.object` inside).
 */
export function fileVariables(schema: z.ZodType): string[] {
  return (objectKeys(schema) ?? []).filter((name) => name.endsWith('_TOKEN'));
}

function objectKeys(schema: z.ZodType): string[] | undefined {
  let inner: z.ZodType = schema;
  while (inner instanceof z.ZodPipe) inner = inner.in as z.ZodType;
  return inner instanceof z.ZodObject ? Object.keys(inner.shape) : undefined;
}

/** Every variable name `schema` accepts: its keys and the `<NAME>_FILE` form of each of its {@link fileVariables}. */
export function acceptedVariables(schema: z.ZodType): Set<string> {
  return new Set([...schemaKeys(schema), ...fileVariables(schema).map((name) => `${name}${FILE_SUFFIX}`)]);
}

/**
 * `env` with each `<NAME>_FILE` of {@link fileVariables} replaced by the content of that file
 * as `<NAME>` (one trailing newline dropped), which variables came from which file, and the
 * problems: both `<NAME>` and `<NAME>_FILE` set, a file that cannot be read, an empty file. A
 * problem names the `_FILE` variable and its path, never the content. Empty `<NAME>_FILE` is unset.
 */
export function readFileVariables(schema: z.ZodType, env: Env): { env: Env; fromFile: Map<string, string>; problems: ConfigProblem[] } {
  const resolved: Record<string, string | undefined> = { ...env };
  const fromFile = new Map<string, string>();
  const problems: ConfigProblem[] = [];
  for (const name of fileVariables(schema)) {
    const fileVariable = `${name}${FILE_SUFFIX}`;
    const path = env[fileVariable];
    if (path === undefined || path === '') continue;
    const problem = (reason: string): void => {
      problems.push({ variable: fileVariable, shown: JSON.stringify(path), reason });
    };
    if (env[name] !== undefined && env[name] !== '') {
      problem(`set either ${name} or ${fileVariable}, not both`);
      continue;
    }
    let content: string;
    try {
      content = readFileSync(path, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      problem(`cannot read the file (${code ?? (error as Error).message})`);
      continue;
    }
    content = content.replace(/\r?\n$/, '');
    if (content === '') {
      problem('the file is empty');
      continue;
    }
    resolved[name] = content;
    fromFile.set(name, path);
  }
  return { env: resolved, fromFile, problems };
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
