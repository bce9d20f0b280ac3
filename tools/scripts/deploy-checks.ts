// Helpers for tools/scripts/deploy.int.spec.ts and images.int.spec.ts: reading the deployment files under
// deploy/ the way Prometheus, Grafana, Docker, Docker Compose and Kubernetes read them, far enough
// to check the names they use against what the apps really export and accept.
import { isAbsolute } from 'node:path';
import { acceptedVariables, ConfigError, loadConfig } from '@llmgw/config';
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

/**
 * What is wrong with running an app with `env`: LLMGW_* names its schema does not accept (it would
 * ignore them silently), then every problem its config loader reports. Empty means it boots.
 */
export function envProblems(schema: z.ZodType, env: Readonly<Record<string, string>>): string[] {
  const keys = acceptedVariables(schema);
  const problems = Object.keys(env)
    .filter((name) => name.startsWith('LLMGW_') && !keys.has(name))
    .map((name) => `${name}: not a variable of this app`);
  const { env: checked, problems: paths } = withStandInTlsFiles(env);
  problems.push(...paths);
  try {
    loadConfig(schema, checked);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems.map((p) => `${p.variable}: ${p.reason}`));
  }
  return problems;
}

/**
 * The TLS files a deployment names live where it runs (a mounted secret): each must be an
 * absolute path, and the files this process has in LLMGW_GRPC_TLS_* (the test PKI's, under
 * vitest) stand in for them so the rest of the config can be judged here.
 */
export function withStandInTlsFiles(env: Readonly<Record<string, string>>): { env: Record<string, string>; problems: string[] } {
  const standIn = process.env;
  const out: Record<string, string> = { ...env };
  const problems: string[] = [];
  for (const name of ['LLMGW_GRPC_TLS_CA', 'LLMGW_GRPC_TLS_CERT', 'LLMGW_GRPC_TLS_KEY'] as const) {
    const value = env[name];
    if (value === undefined || standIn[name] === undefined) continue;
    if (!isAbsolute(value)) problems.push(`${name}: ${value} is not an absolute path`);
    out[name] = standIn[name];
  }
  return { env: out, problems };
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

/** `ENV a=b c=d` (the form deploy/container/*.Dockerfile use) as a map. */
export function dockerEnv(instructions: readonly DockerInstruction[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of instructions.filter((x) => x.keyword === 'ENV')) {
    for (const m of i.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) env[m[1]] = m[2].replace(/^"(.*)"$/, '$1');
  }
  return env;
}

/** One stage of a Dockerfile: its base image (build arguments resolved), its name, its instructions. */
export interface DockerStage {
  from: string;
  name?: string;
  instructions: DockerInstruction[];
}

/** The stages of a Dockerfile; `ARG NAME=default` lines before the first FROM resolve `${NAME}` in FROM. */
export function dockerStages(instructions: readonly DockerInstruction[]): DockerStage[] {
  const args: Record<string, string> = {};
  const stages: DockerStage[] = [];
  for (const i of instructions) {
    if (i.keyword === 'FROM') {
      const [image, as, name] = i.args.split(/\s+/);
      const from = image.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_, a?: string, b?: string) => args[(a ?? b) as string] ?? '');
      stages.push({ from, ...(as?.toUpperCase() === 'AS' && name && { name }), instructions: [] });
    } else if (stages.length === 0) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(\S*)$/.exec(i.args);
      if (i.keyword === 'ARG' && m) args[m[1]] = m[2];
    } else stages.at(-1)!.instructions.push(i);
  }
  return stages;
}

/** The official Node.js 24 images: `node:24`, `node:24.x.y`, with a variant (`-bookworm-slim`) and a digest or not. */
const NODE_24_IMAGE = /^node:24(\.\d+){0,2}(-[a-z0-9.-]+)?(@sha256:[0-9a-f]{64})?$/;
/** Package managers and system installers: a build stage runs them, the final stage never. */
const INSTALLERS = /\b(apt-get|apt|apk|npm|npx|yarn|pnpm|node-gyp)\b/;

/**
 * What is wrong with the Dockerfile of one app's image (empty when nothing): every stage on a
 * Node 24 base; from the build context only `dist/apps/<app>/` (its package.json and lockfile in
 * a build stage that runs `npm ci --omit=dev`, then the app in the final stage); from earlier
 * stages only their node_modules; no installer in the final stage; a numeric non-root USER;
 * `ENTRYPOINT ["node", "main.js"]` and no CMD.
 */
export function imageProblems(text: string, app: string): string[] {
  const problems: string[] = [];
  const stages = dockerStages(dockerInstructions(text));
  const dist = `dist/apps/${app}/`;
  if (stages.length < 2) problems.push(`expected a build stage and a final stage, found ${stages.length} stage(s)`);
  for (const [n, s] of stages.entries()) {
    if (!NODE_24_IMAGE.test(s.from)) problems.push(`stage ${n + 1}: FROM ${s.from || '(empty)'} is not a Node 24 image`);
    for (const i of s.instructions.filter((x) => x.keyword === 'COPY' || x.keyword === 'ADD')) {
      const words = i.args.split(/\s+/);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const sources = words.filter((w) => !w.startsWith('--')).slice(0, -1);
      if (i.keyword === 'ADD') problems.push(`ADD ${i.args}: use COPY`);
      else if (from !== undefined) {
        if (!stages.slice(0, n).some((e) => e.name === from)) problems.push(`COPY ${i.args}: --from is not an earlier stage`);
        for (const src of sources) if (!/^(\/[^/]+)*\/node_modules\/?$/.test(src)) problems.push(`COPY ${i.args}: only node_modules may come from another stage, not ${src}`);
      } else for (const src of sources) if (!src.startsWith(dist)) problems.push(`COPY ${i.args}: ${src} is not under ${dist}`);
    }
  }
  const installs = stages.slice(0, -1).filter((s) => {
    const copied = s.instructions.filter((i) => i.keyword === 'COPY').flatMap((i) => i.args.split(/\s+/));
    const ci = s.instructions.findIndex((i) => i.keyword === 'RUN' && /\bnpm ci --omit=dev\b/.test(i.args));
    const lock = s.instructions.findIndex((i) => i.keyword === 'COPY' && i.args.split(/\s+/).includes(`${dist}package-lock.json`));
    return copied.includes(`${dist}package.json`) && lock !== -1 && ci > lock;
  });
  if (installs.length === 0) problems.push(`no build stage copies ${dist}package.json and package-lock.json and then runs npm ci --omit=dev`);
  for (const s of stages) {
    for (const i of s.instructions.filter((x) => x.keyword === 'RUN' && /\bnpm (install|i|add|update)\b/.test(x.args))) problems.push(`RUN ${oneLine(i.args)}: install from the lockfile (npm ci), not npm install`);
  }
  const final = stages.at(-1);
  if (final) {
    for (const i of final.instructions.filter((x) => x.keyword === 'RUN' && INSTALLERS.test(x.args))) problems.push(`final stage: RUN ${oneLine(i.args)}: installs belong in a build stage`);
    if (!final.instructions.some((i) => i.keyword === 'COPY' && !i.args.startsWith('--from') && i.args.split(/\s+/)[0] === dist)) problems.push(`final stage: does not copy ${dist}`);
    const user = final.instructions.filter((i) => i.keyword === 'USER').at(-1)?.args;
    const ids = /^(\d+):(\d+)$/.exec(user ?? '');
    if (!ids) problems.push(`final stage: USER ${user ?? '(none)'} is not a numeric uid:gid`);
    else if (ids[1] === '0') problems.push('final stage: USER 0 is root');
    const entry = final.instructions.filter((i) => i.keyword === 'ENTRYPOINT').at(-1)?.args;
    if (entry !== '["node", "main.js"]') problems.push(`final stage: ENTRYPOINT ${entry ?? '(none)'} is not ["node", "main.js"]`);
    if (final.instructions.some((i) => i.keyword === 'CMD')) problems.push('final stage: CMD given: the image runs one app, with no arguments');
  }
  return problems;
}

const oneLine = (text: string): string => text.replace(/\s+/g, ' ');

/** `registry/path/llmgw-<app>:<tag>` → app and tag; undefined for any other image. */
export function llmgwImage(reference: string): { app: string; tag: string } | undefined {
  const m = /^(?:[^/]+\/)*llmgw-([a-z]+):([A-Za-z0-9_.-]+)$/.exec(reference);
  return m ? { app: m[1], tag: m[2] } : undefined;
}
