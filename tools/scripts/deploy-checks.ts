// Helpers for tools/scripts/deploy.spec.ts: reading the deployment files under deploy/ the way
// Prometheus, Grafana, Docker Compose and Kubernetes read them, far enough to check the names
// they use against what the apps really export and accept.
import { ConfigError, loadConfig } from '@llmgw/config';
import { z } from 'zod';

/** PromQL words that look like names but are operators, modifiers or aggregations. */
const PROMQL_KEYWORDS = new Set([
  'and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan',
  'sum', 'avg', 'min', 'max', 'count', 'group', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values',
]);

/**
 * The metric names a PromQL expression selects (each once, in order of appearance). Strings,
 * label matchers, ranges, label lists of by/on/…, Grafana variables (`$model`,
 * `$__rate_interval`, `${x}`), numbers, keywords and function calls are not names. Good enough
 * for the expressions in deploy/: `{__name__=…}` selectors are not understood.
 */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*/g, '1')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '$1')
    .replace(/\boffset\s+-?[0-9a-z]+/g, '');
  const names: string[] = [];
  for (const m of stripped.matchAll(/(\d+(?:\.\d+)?(?:e[+-]?\d+)?)|([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?/g)) {
    const word = m[2];
    if (word === undefined || m[3] !== undefined || PROMQL_KEYWORDS.has(word.toLowerCase())) continue;
    if (!names.includes(word)) names.push(word);
  }
  return names;
}

/**
 * Every series name a Prometheus text exposition can produce, from its `# TYPE` lines:
 * histograms add `_bucket`, `_sum`, `_count`; summaries `_sum`, `_count`. A family without
 * samples still has its TYPE line, so this is every family the registry holds.
 */
export function seriesNamesOf(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

/** `KEY=VALUE` lines of an env file (comments and blank lines skipped), as Compose reads `.env`. */
export function parseEnvFile(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) vars[m[1]] = m[2].trim();
  }
  return vars;
}

/**
 * Compose interpolation of one value: `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
 * `${VAR:?message}`, `${VAR?message}` and `$$`. A variable that is unset without a default throws,
 * naming it, as `docker compose` refuses to start.
 */
export function interpolateCompose(value: string, vars: Readonly<Record<string, string>>): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, braced, op, arg, bare) => {
    if (whole === '$$') return '$';
    const name = (braced ?? bare) as string;
    const set = vars[name];
    const present = op?.startsWith(':') ? set !== undefined && set !== '' : set !== undefined;
    if (present) return set;
    if (op === ':-' || op === '-') return arg as string;
    throw new Error(`compose variable ${name} is not set${arg ? `: ${arg}` : ''}`);
  });
}

/** A container's `env` entry in a Kubernetes manifest. */
export interface KubernetesEnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
}

/**
 * The environment a Kubernetes container gets from its `env` list: values, Secret keys looked up
 * in `secrets` (name → key → value), fields from `fields` (fieldPath → example value), and
 * `$(NAME)` references to variables defined earlier in the list. Throws on a reference it cannot
 * resolve, as a missing Secret key keeps the pod from starting.
 */
export function kubernetesEnv(
  list: readonly KubernetesEnvVar[],
  secrets: Readonly<Record<string, Readonly<Record<string, string>>>>,
  fields: Readonly<Record<string, string>>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const v of list) {
    const secret = v.valueFrom?.secretKeyRef;
    const field = v.valueFrom?.fieldRef;
    let value: string | undefined;
    if (v.value !== undefined) value = v.value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (ref, name: string) => env[name] ?? ref);
    else if (secret) value = secrets[secret.name]?.[secret.key];
    else if (field) value = fields[field.fieldPath];
    if (value === undefined) throw new Error(`env ${v.name}: cannot resolve ${JSON.stringify(v.valueFrom ?? v)}`);
    env[v.name] = value;
  }
  return env;
}

/** The variable names an app's config schema reads: the keys of the object inside its refinements and transforms. */
export function schemaKeys(schema: z.ZodType): Set<string> {
  let inner: z.ZodType = schema;
  while (inner instanceof z.ZodPipe) inner = inner.in as z.ZodType;
  if (!(inner instanceof z.ZodObject)) throw new Error('schemaKeys: expected a z.object(...) inside the schema');
  return new Set(Object.keys(inner.shape));
}

/**
 * What is wrong with running an app with `env`: LLMGW_* names its schema does not read (it would
 * ignore them silently), then every problem its config loader reports. Empty means it boots.
 */
export function envProblems(schema: z.ZodType, env: Readonly<Record<string, string>>): string[] {
  const keys = schemaKeys(schema);
  const problems = Object.keys(env)
    .filter((name) => name.startsWith('LLMGW_') && !keys.has(name))
    .map((name) => `${name}: not a variable of this app`);
  try {
    loadConfig(schema, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems.map((p) => `${p.variable}: ${p.reason}`));
  }
  return problems;
}

/** Every `LLMGW_…` name a text mentions, once each; `LLMGW_ROUTER_MAX_*` is kept with its `*`. */
export function llmgwNamesIn(text: string): string[] {
  return [...new Set(text.match(/\bLLMGW_[A-Z0-9_]*[A-Z0-9]\b(?:_\*)?/g) ?? [])];
}

/** One Dockerfile instruction: its keyword (upper case) and the rest, continuation lines joined. */
export interface DockerInstruction {
  keyword: string;
  args: string;
}

/** The instructions of a Dockerfile, comments dropped and `\` continuations joined. */
export function dockerInstructions(text: string): DockerInstruction[] {
  const joined = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ');
  const out: DockerInstruction[] = [];
  for (const line of joined.split('\n')) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m) out.push({ keyword: m[1].toUpperCase(), args: m[2].trim() });
  }
  return out;
}

/** `ENV a=b c=d` (the form deploy/container/Dockerfile uses) as a map. */
export function dockerEnv(instructions: readonly DockerInstruction[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of instructions.filter((x) => x.keyword === 'ENV')) {
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) env[m[1]] = m[2].replace(/^"(.*)"$/, '$1');
  }
  return env;
}
