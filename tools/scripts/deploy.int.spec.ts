import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { acceptedVariables } from '@llmgw/config';
import { createMetricsRegistry } from '@llmgw/observability';
import { parse, parseAllDocuments, stringify } from 'yaml';
import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../../apps/agent/src/config/agent.config';
import { catalogConfigSchema } from '../../apps/catalog/src/config/catalog.config';
import { controllerConfigSchema } from '../../apps/controller/src/config/controller.config';
import { startController } from '../../apps/controller/src/test/controller.harness';
import { routerConfigSchema } from '../../apps/router/src/config/router.config';
import { startRouter } from '../../apps/router/src/test/router.harness';
import {
  dockerEnv,
  dockerInstructions,
  envProblems,
  interpolateCompose,
  kubernetesEnv,
  llmgwImage,
  llmgwNamesIn,
  metricNamesIn,
  parseEnvFile,
  seriesNamesOf,
  withStandInTlsFiles,
  type KubernetesEnvVar,
} from './deploy-checks';

// Keeps the files under deploy/ true to the code: Prometheus config and rules pass promtool and
// their unit tests; every metric name in the rules and the dashboard is one the apps export;
// every LLMGW_* variable in the compose file and the Kubernetes manifests is one the target app's
// config schema reads, with a value it accepts; ports, probes, selectors and scrape targets agree.
//
// Exported metric names come from the apps themselves, not from reading their source: the real
// router and controller modules are booted in this process (the harnesses their own tests use)
// and their /metrics read; the catalog and the agent export only the process metrics every app's
// createMetricsRegistry() registers. That a metric family defined anywhere in apps/ is among
// these is checked too, so a new family in another app fails here until that app is booted too.

const root = resolve(__dirname, '..', '..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

type AppName = 'router' | 'controller' | 'catalog' | 'agent';
const SCHEMAS: Record<AppName, z.ZodType> = {
  router: routerConfigSchema,
  controller: controllerConfigSchema,
  catalog: catalogConfigSchema,
  agent: agentConfigSchema,
};
/** The parts of a loaded config these checks compare ports with. */
interface Ports {
  port: number;
  grpcPort?: number;
}
const portsOf = (app: AppName, env: Record<string, string>): Ports => SCHEMAS[app].parse(withStandInTlsFiles(env).env) as Ports;

/** Series Prometheus makes itself: per target, and for alerting rules. */
const PROMETHEUS_SERIES = ['up', 'scrape_duration_seconds', 'scrape_samples_scraped', 'scrape_samples_post_metric_relabeling', 'scrape_series_added', 'ALERTS', 'ALERTS_FOR_STATE'];

/** The app a per-app image reference such as `registry.example.internal/llmgw-router:0.1.0` runs; throws for anything else. */
function appOfImage(reference: string | undefined): AppName {
  const app = llmgwImage(reference ?? '')?.app;
  if (app === undefined || !(app in SCHEMAS) || app === 'agent') throw new Error(`not an llmgw app image: ${reference}`);
  return app as AppName;
}

function promtool(args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { cwd: root, encoding: 'utf8', timeout: 60_000 });
  if (run.error) throw new Error(`promtool is needed for this test (apt-get install -y prometheus): ${run.error.message}`);
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

interface RuleGroup {
  name: string;
  rules: { record?: string; alert?: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }[];
}
const ruleGroups = (text: string): RuleGroup[] => (parse(text) as { groups: RuleGroup[] }).groups;

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: { refId: string; expr?: string; datasource?: { uid: string } }[];
}
interface Dashboard {
  schemaVersion: number;
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown; definition?: string }[] };
}
const dashboard = (): Dashboard => JSON.parse(read('deploy/grafana/llmgw-overview.json')) as Dashboard;

/** Every PromQL expression of the dashboard: panel targets and `label_values(metric, label)` variable queries. */
function dashboardExprs(d: Dashboard): string[] {
  const exprs = d.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr ?? ''));
  for (const v of d.templating.list) {
    const m = /^label_values\(\s*([^,]+),/.exec(v.definition ?? '');
    if (m) exprs.push(m[1]);
  }
  return exprs;
}

/** The names in `exprs` that are neither an exported series, a series Prometheus makes, nor a recording rule. */
function unknownNames(exprs: readonly string[], known: ReadonlySet<string>): string[] {
  return [...new Set(exprs.flatMap(metricNamesIn))].filter((n) => !known.has(n)).sort();
}

// --- The files, read as their tools read them -----------------------------------------------

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string | number>;
  ports?: string[];
  healthcheck?: { test: string[] };
  volumes?: string[];
}
const compose = (): { services: Record<string, ComposeService> } =>
  parse(read('deploy/compose/compose.yaml'), { merge: true }) as { services: Record<string, ComposeService> };
/**
 * What an operator puts in place of an example token: the shipped examples hold placeholders the
 * apps refuse (checked below), so the other checks run with a generated-looking value per name.
 */
const realToken = (name: string): string => `${name.toLowerCase().replace(/[^a-z]/g, '')}0123456789abcdef`;
/** `.env.example` as shipped. */
const composeExampleVars = (): Record<string, string> => parseEnvFile(read('deploy/compose/.env.example'));
/** `.env.example` with its tokens replaced the way the operator is told to. */
const composeVars = (): Record<string, string> =>
  Object.fromEntries(Object.entries(composeExampleVars()).map(([k, v]) => [k, k.endsWith('_TOKEN') ? realToken(k) : v]));
/** The LLMGW_* settings an app's image (deploy/container/<app>.Dockerfile) sets. */
const imageEnv = (app: AppName): Record<string, string> =>
  Object.fromEntries(Object.entries(dockerEnv(dockerInstructions(read(`deploy/container/${app}.Dockerfile`)))).filter(([k]) => k.startsWith('LLMGW_')));

/** The llmgw services of compose.yaml (those running an llmgw-<app> image): app, resolved environment. */
function composeApps(vars: Record<string, string> = composeVars()): { service: string; app: AppName; env: Record<string, string>; spec: ComposeService }[] {
  return Object.entries(compose().services)
    .filter(([, s]) => llmgwImage(s.image ?? '') !== undefined)
    .map(([service, s]) => {
      const app = appOfImage(s.image);
      const env = { ...imageEnv(app) };
      for (const [k, v] of Object.entries(s.environment ?? {})) env[k] = interpolateCompose(String(v), vars);
      return { service, app, env, spec: s };
    });
}

interface K8sContainer {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: KubernetesEnvVar[];
  ports?: { name: string; containerPort: number }[];
  startupProbe?: { httpGet: { path: string; port: string } };
  livenessProbe?: { httpGet: { path: string; port: string } };
  readinessProbe?: { httpGet: { path: string; port: string } };
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: {
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    template?: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: { containers: K8sContainer[] } };
    ports?: { name: string; port: number; targetPort: string }[];
    scaleTargetRef?: { kind: string; name: string };
  };
  stringData?: Record<string, string>;
}
const K8S_DIR = 'deploy/kubernetes';
/** What `kubectl apply -f deploy/kubernetes/` applies: the YAML files of the directory itself, not of its subdirectories. */
const k8sFiles = (): string[] => readdirSync(join(root, K8S_DIR)).filter((f) => /\.ya?ml$/.test(f)).sort();
const yamlObjects = (path: string): K8sObject[] => parseAllDocuments(read(path)).map((d) => d.toJS() as K8sObject).filter(Boolean);
const k8sObjects = (): K8sObject[] => k8sFiles().flatMap((f) => yamlObjects(`${K8S_DIR}/${f}`));
/** The example Secret, outside the applied directory; the operator creates the real one. */
const K8S_SECRET_EXAMPLE = `${K8S_DIR}/examples/secret.example.yaml`;
const exampleSecrets = (): Record<string, Record<string, string>> =>
  Object.fromEntries(yamlObjects(K8S_SECRET_EXAMPLE).filter((o) => o.kind === 'Secret').map((o) => [o.metadata.name, o.stringData ?? {}]));
/** The example Secret with its tokens replaced the way the operator is told to. */
const operatorSecrets = (): Record<string, Record<string, string>> =>
  Object.fromEntries(
    Object.entries(exampleSecrets()).map(([name, data]) => [name, Object.fromEntries(Object.entries(data).map(([k, v]) => [k, k.endsWith('-token') ? realToken(k) : v]))]),
  );
/** Example values of the pod fields the manifests read (the real ones exist only in a cluster). */
const FIELD_EXAMPLES = { 'status.podIP': '10.244.1.17', 'metadata.name': 'llmgw-router-6d5f8b7c9-x2kqp' };

/** The llmgw containers of the Kubernetes manifests: their Deployment, app and resolved environment. */
function k8sApps(secrets: Record<string, Record<string, string>> = operatorSecrets()): { deployment: K8sObject; container: K8sContainer; app: AppName; env: Record<string, string> }[] {
  const objects = k8sObjects();
  return objects
    .filter((o) => o.kind === 'Deployment')
    .flatMap((deployment) =>
      (deployment.spec?.template?.spec.containers ?? []).map((container) => {
        const app = appOfImage(container.image);
        return { deployment, container, app, env: { ...imageEnv(app), ...kubernetesEnv(container.env ?? [], secrets, FIELD_EXAMPLES) } };
      }),
    );
}

/** Every YAML file under deploy/, relative to the repository root. */
function deployYamlFiles(dir = 'deploy'): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return deployYamlFiles(path);
    return /\.ya?ml$/.test(e.name) ? [path] : [];
  });
}

// --- Tests -------------------------------------------------------------------------------------

describe('metric names in the rules and the dashboard', () => {
  let exported: Set<string>;
  let families: Set<string>;
  let known: Set<string>;
  const dataDir = mkdtempSync(join(tmpdir(), 'llmgw-deploy-spec-'));

  beforeAll(async () => {
    const router = await startRouter({});
    const controller = await startController({ LLMGW_DATA_DIR: dataDir, LLMGW_LOG_LEVEL: 'silent' });
    try {
      const texts = [
        await (await fetch(`${router.url}/metrics`)).text(),
        await (await fetch(`${controller.http}/metrics`)).text(),
        await createMetricsRegistry().metrics(),
      ];
      exported = new Set(texts.flatMap((t) => [...seriesNamesOf(t)]));
      families = new Set(texts.flatMap((t) => [...t.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1])));
    } finally {
      await router.close();
      await controller.close();
    }
    const records = ruleGroups(read('deploy/prometheus/llmgw.rules.yml')).flatMap((g) => g.rules.flatMap((r) => (r.record ? [r.record] : [])));
    known = new Set([...exported, ...PROMETHEUS_SERIES, ...records]);
  }, 120_000);

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('the booted apps export every llmgw_* family defined in apps/ (none is missed)', () => {
    const sources = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
        const path = `${dir}/${e.name}`;
        if (e.isDirectory()) return ['test', '__fixtures__'].includes(e.name) ? [] : sources(path);
        return /\.ts$/.test(e.name) && !/\.(spec|e2e)\.ts$/.test(e.name) ? [path] : [];
      });
    const defined = new Set(sources('apps').flatMap((f) => [...read(f).matchAll(/['"`](llmgw_[a-z0-9_]*[a-z0-9])['"`]/g)].map((m) => m[1])));
    expect(defined.size).toBeGreaterThan(40);
    expect([...defined].filter((name) => !families.has(name))).toEqual([]);
  });

  it('every name in llmgw.rules.yml is exported by an app, made by Prometheus or recorded by a rule', () => {
    const exprs = ruleGroups(read('deploy/prometheus/llmgw.rules.yml')).flatMap((g) => g.rules.map((r) => r.expr));
    expect(exprs.length).toBeGreaterThan(20);
    expect(unknownNames(exprs, known)).toEqual([]);
  });

  it('every name in the dashboard is exported by an app or made by Prometheus', () => {
    const exprs = dashboardExprs(dashboard());
    expect(exprs.length).toBeGreaterThan(40);
    expect(unknownNames(exprs, new Set([...exported, ...PROMETHEUS_SERIES]))).toEqual([]);
  });

  it('a misspelt name in a rule or a panel is reported (the check is not vacuous)', () => {
    const rules = read('deploy/prometheus/llmgw.rules.yml').replace('llmgw_router_watch_connected ==', 'llmgw_router_watch_conected ==');
    const exprs = ruleGroups(rules).flatMap((g) => g.rules.map((r) => r.expr));
    expect(unknownNames(exprs, known)).toEqual(['llmgw_router_watch_conected']);
    const d = dashboard();
    d.panels.find((p) => p.targets?.length)!.targets![0].expr = 'sum(rate(llmgw_router_request_total[5m]))';
    expect(unknownNames(dashboardExprs(d), known)).toEqual(['llmgw_router_request_total']);
  });

  it('reads names out of PromQL the way Prometheus would', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, instance) (rate(a_bucket{x="y{z}", m=~"$model"}[$__rate_interval]))) > 2.5e-1' +
          ' and on (instance, job) (b == 1) unless ignoring (state) c:rec:rate5m offset 5m or max without (node) (d) > 50 * 1024 ^ 3',
      ),
    ).toEqual(['a_bucket', 'b', 'c:rec:rate5m', 'd']);
  });
});

describe('deploy/prometheus', () => {
  it('promtool check config passes and finds the rules file beside it', () => {
    const r = promtool(['check', 'config', 'deploy/prometheus/prometheus.yml']);
    expect(r.output).toContain('SUCCESS: 1 rule files found');
    expect(r.status, r.output).toBe(0);
  });

  it('promtool check rules passes', () => {
    const r = promtool(['check', 'rules', 'deploy/prometheus/llmgw.rules.yml']);
    expect(r.status, r.output).toBe(0);
  });

  it('promtool test rules: every case fires exactly the alerts it expects', () => {
    const r = promtool(['test', 'rules', 'deploy/prometheus/llmgw.rules.test.yml']);
    expect(r.status, r.output).toBe(0);
  });

  it('every alert has a duration, a severity and a summary and description', () => {
    const alerts = ruleGroups(read('deploy/prometheus/llmgw.rules.yml')).flatMap((g) => g.rules.filter((r) => r.alert));
    expect(alerts.length).toBeGreaterThan(20);
    for (const a of alerts) {
      expect(a.for, a.alert).toMatch(/^\d+[smh]$/);
      expect(['critical', 'warning'], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description, a.alert).toBeTruthy();
    }
  });

  it('scrapes every llmgw service of compose.yaml at its app port, in the job the rules use', () => {
    const config = parse(read('deploy/prometheus/prometheus.yml')) as { scrape_configs: { job_name: string; static_configs: { targets: string[] }[] }[] };
    const targets = (job: string) => config.scrape_configs.find((s) => s.job_name === job)?.static_configs.flatMap((c) => c.targets) ?? [];
    for (const { service, app, env } of composeApps()) expect(targets(`llmgw-${app}`)).toContain(`${service}:${portsOf(app, env).port}`);
    for (const app of Object.keys(SCHEMAS)) expect(config.scrape_configs.map((s) => s.job_name)).toContain(`llmgw-${app}`);
  });
});

describe('deploy/grafana', () => {
  it('the dashboard is one Grafana 10+ dashboard with a Prometheus data source variable', () => {
    const d = dashboard();
    expect(d.schemaVersion).toBeGreaterThanOrEqual(39);
    expect(d.uid).toBe('llmgw-overview');
    expect(d.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));
  });

  it('every panel has an expression per target, the data source variable and a place on the grid', () => {
    const d = dashboard();
    expect(new Set(d.panels.map((p) => p.id)).size).toBe(d.panels.length);
    const rows = d.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows.join(' | ')).toMatch(/Cluster.*Routers.*Engines/);
    for (const p of d.panels.filter((x) => x.type !== 'row')) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      for (const t of p.targets ?? []) expect(t.expr?.trim(), `${p.title} ${t.refId}`).toBeTruthy();
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
    }
  });

  it('every panel expression is valid PromQL once Grafana has replaced its variables (promtool check rules)', () => {
    const exprs = dashboard().panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr ?? ''));
    const asGrafanaSends = (e: string) => e.replaceAll('$__rate_interval', '1m').replaceAll('$model', '.*');
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-dashboard-'));
    try {
      const file = join(dir, 'dashboard.rules.yml');
      writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: exprs.map((e, i) => ({ record: `dashboard_expr_${i}`, expr: asGrafanaSends(e) })) }] }));
      const r = promtool(['check', 'rules', file]);
      expect(r.status, r.output).toBe(0);
      expect(r.output).toContain(`SUCCESS: ${exprs.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('compose provisions the dashboard where the provider looks, and the data source the rules and panels use', () => {
    const provider = parse(read('deploy/grafana/provisioning/dashboards/llmgw.yaml')) as { providers: { options: { path: string } }[] };
    const grafana = compose().services['grafana'];
    const mounted = (grafana.volumes ?? []).find((v) => v.startsWith('../grafana/llmgw-overview.json:'));
    expect(mounted?.split(':')[1]).toBe(`${provider.providers[0].options.path}/llmgw-overview.json`);
    const ds = parse(read('deploy/grafana/provisioning/datasources/prometheus.yaml')) as { datasources: { type: string; url: string }[] };
    expect(ds.datasources[0]).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090' });
    expect(Object.keys(compose().services)).toContain('prometheus');
  });
});

describe('settings and entries of the compose file, the images and the Kubernetes manifests', () => {
  it('every YAML file under deploy/ parses', () => {
    const files = deployYamlFiles();
    expect(files.length).toBeGreaterThan(10);
    for (const f of files) {
      for (const doc of parseAllDocuments(read(f))) expect(doc.errors.map(String), f).toEqual([]);
    }
  });

  it('every package production code imports is a runtime dependency (a built app lists only those)', () => {
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
    const DEV_ONLY = ['tools/build', 'tools/run.cjs', 'tools/bin', 'tools/llama-engine', 'tools/gguf/src/load-check.mjs'];
    const files = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
        const path = `${dir}/${e.name}`;
        // Only in a checkout, never in a built app: tools/build is the build itself (esbuild config,
        // Nx plugin); tools/run.cjs (the SWC loader) and tools/bin (the `npx llmgw…` links onto it)
        // run TypeScript from source for `npm start`, the tests and the benchmarks; tools/llama-engine
        // (the CPU engine on node-llama-cpp, a devDependency) is what `npm start` and the tests run
        // where no llama-server is installed, and tools/gguf's load-check.mjs tries a model on it
        // for a test: no app, dist or image holds either.
        if (e.isDirectory()) return ['node_modules', 'test', 'testing', '__fixtures__', 'e2e', 'bench', 'scripts'].includes(e.name) || DEV_ONLY.includes(path) ? [] : files(path);
        return /\.(ts|cjs|mjs)$/.test(e.name) && !/\.(spec|e2e)\.ts$/.test(e.name) && !DEV_ONLY.includes(path) ? [path] : [];
      });
    const missing = new Set<string>();
    for (const f of [...files('apps'), ...files('libs'), ...files('tools')]) {
      for (const m of read(f).matchAll(/^\s*import\s+(type\s+)?[^;]*?\bfrom\s+['"]([^'"]+)['"]|\brequire\(\s*['"]([^'"]+)['"]\s*\)|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm)) {
        const spec = m[2] ?? m[3] ?? m[4];
        if (m[1] || spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('@llmgw/') || spec.startsWith('node:') || builtinModules.includes(spec)) continue;
        const name = spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');
        if (!(name in pkg.dependencies)) missing.add(`${name} (${relative(root, join(root, f))})`);
      }
    }
    expect([...missing]).toEqual([]);
  });

  it('compose: every llmgw service runs an app image, with settings its schema reads and accepts', () => {
    const apps = composeApps();
    expect(apps.map((a) => `${a.service}:${a.app}`).sort()).toEqual(['catalog:catalog', 'controller:controller', 'router-1:router', 'router-2:router']);
    for (const { service, app, env, spec } of apps) {
      expect(spec.command, service).toBeUndefined();
      expect(envProblems(SCHEMAS[app], env), service).toEqual([]);
      const { port, grpcPort } = portsOf(app, env);
      const published = (spec.ports ?? []).map((p) => Number(p.split(':').at(-1)));
      expect(published, service).toContain(port);
      if (grpcPort !== undefined) expect(published, service).toContain(grpcPort);
      expect(spec.healthcheck?.test.join(' '), service).toContain(`http://127.0.0.1:${port}/readyz`);
    }
  });

  it('kubernetes: every container runs an app image, with settings its schema reads and accepts', () => {
    const apps = k8sApps();
    expect(apps.map((a) => `${a.deployment.metadata.name}:${a.app}`).sort()).toEqual([
      'llmgw-catalog:catalog',
      'llmgw-controller:controller',
      'llmgw-router:router',
    ]);
    for (const { deployment, container, app, env } of apps) {
      const where = deployment.metadata.name;
      expect([container.command, container.args], where).toEqual([undefined, undefined]);
      expect(envProblems(SCHEMAS[app], env), where).toEqual([]);
      const { port, grpcPort } = portsOf(app, env);
      const ports = Object.fromEntries((container.ports ?? []).map((p) => [p.name, p.containerPort]));
      expect(ports['http'], where).toBe(port);
      if (grpcPort !== undefined) expect(ports['grpc'], where).toBe(grpcPort);
      expect(deployment.spec?.template?.metadata.annotations?.['prometheus.io/port'], where).toBe(String(port));
      expect(container.startupProbe?.httpGet, where).toEqual({ path: '/healthz', port: 'http' });
      expect(container.livenessProbe?.httpGet, where).toEqual({ path: '/healthz', port: 'http' });
      expect(container.readinessProbe?.httpGet, where).toEqual({ path: '/readyz', port: 'http' });
    }
    const controller = apps.find((a) => a.app === 'controller')!;
    expect(controller.deployment.spec).toMatchObject({ replicas: 2 });
    expect(controller.env['LLMGW_CONTROLLER_LEASE']).toBeTruthy();
    expect(controller.env['LLMGW_CONTROLLER_ADVERTISE_ADDRESS']).toBe(`${FIELD_EXAMPLES['status.podIP']}:8082`);
  });

  it('kubernetes: `kubectl apply -f deploy/kubernetes/` applies no Secret; the example Secret lies outside it and names every key the manifests read', () => {
    expect(k8sObjects().filter((o) => o.kind === 'Secret')).toEqual([]);
    const example = exampleSecrets();
    expect(Object.keys(example)).toEqual(['llmgw']);
    const keys = k8sObjects()
      .flatMap((o) => o.spec?.template?.spec.containers ?? [])
      .flatMap((c) => (c.env ?? []).flatMap((v) => (v.valueFrom?.secretKeyRef ? [`${v.valueFrom.secretKeyRef.name}/${v.valueFrom.secretKeyRef.key}`] : [])));
    expect([...new Set(keys)].sort()).toEqual(Object.keys(example.llmgw).map((k) => `llmgw/${k}`).sort());
    expect(keys).toContain('llmgw/router-token');
    // The README tells how to create the real one.
    expect(read('deploy/README.md')).toContain('kubectl -n llmgw create secret generic llmgw');
  });

  it('the apps refuse the example tokens of the Kubernetes Secret and of compose .env.example, naming each variable', () => {
    const refused = (apps: { app: AppName; env: Record<string, string> }[]): string[] =>
      apps.flatMap(({ app, env }) => envProblems(SCHEMAS[app], env).map((p) => `${app} ${p.split(':')[0]}`));
    const expected = [
      'catalog LLMGW_CATALOG_ADMIN_TOKEN',
      'controller LLMGW_CONTROLLER_ADMIN_TOKEN',
      'controller LLMGW_CONTROLLER_JOIN_TOKEN',
      'controller LLMGW_CONTROLLER_ROUTER_TOKEN',
      'router LLMGW_ROUTER_CONTROLLER_TOKEN',
    ];
    expect([...new Set(refused(k8sApps(exampleSecrets())))].sort()).toEqual(expected);
    expect([...new Set(refused(composeApps(composeExampleVars())))].sort()).toEqual(expected);
    const agentExample = parseEnvFile(read('deploy/agent.env.example'));
    expect(envProblems(SCHEMAS.agent, agentExample).map((p) => p.split(':')[0])).toEqual(['LLMGW_AGENT_JOIN_TOKEN']);
  });

  it('kubernetes: selectors, Services, the autoscaler and the budgets point at what exists', () => {
    const objects = k8sObjects();
    expect(objects.every((o) => o.kind === 'Namespace' || o.metadata.namespace === 'llmgw')).toBe(true);
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    const matches = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
    for (const d of deployments) expect(matches(d.spec!.selector!.matchLabels!, d.spec!.template!.metadata.labels), d.metadata.name).toBe(true);
    const target = (selector: Record<string, string>) => deployments.filter((d) => matches(selector, d.spec!.template!.metadata.labels));
    for (const s of objects.filter((o) => o.kind === 'Service')) {
      const [d] = target(s.spec!.selector as Record<string, string>);
      expect(d, s.metadata.name).toBeDefined();
      const names = d.spec!.template!.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.name));
      for (const p of s.spec!.ports!) expect(names, `${s.metadata.name} ${p.name}`).toContain(p.targetPort);
    }
    for (const b of objects.filter((o) => o.kind === 'PodDisruptionBudget')) expect(target(b.spec!.selector!.matchLabels!), b.metadata.name).toHaveLength(1);
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler')!;
    const scaled = deployments.find((d) => d.metadata.name === hpa.spec!.scaleTargetRef!.name);
    expect(scaled?.spec).not.toHaveProperty('replicas');
  });

  it('every LLMGW_* name mentioned under deploy/ is a variable of an llmgw app (comments included)', () => {
    const ctlSource = read('apps/ctl/src/api/connection.config.ts');
    const names = new Set([
      ...Object.values(SCHEMAS).flatMap((s) => [...acceptedVariables(s)]),
      // llmgw (the CLI) keeps its schema private: its keys, from its source.
      ...[...ctlSource.matchAll(/^\s*(LLMGW_[A-Z0-9_]+):/gm)].map((m) => m[1]),
    ]);
    const files = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(`${dir}/${e.name}`) : [`${dir}/${e.name}`]));
    const unknown: string[] = [];
    for (const f of files('deploy').filter((x) => !x.startsWith('deploy/local/'))) {
      for (const n of llmgwNamesIn(read(f))) {
        const known = n.endsWith('*') ? [...names].some((k) => k.startsWith(n.slice(0, -1))) : names.has(n);
        if (!known) unknown.push(`${f}: ${n}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('a misspelt or misplaced variable is reported (the check is not vacuous)', () => {
    expect(envProblems(routerConfigSchema, { LLMGW_ROUTER_CONTROLER: 'controller:8082' })).toEqual(['LLMGW_ROUTER_CONTROLER: not a variable of this app']);
    expect(envProblems(catalogConfigSchema, { LLMGW_CONTROLLER_LEASE: 'llmgw' })).toEqual(['LLMGW_CONTROLLER_LEASE: not a variable of this app']);
    expect(envProblems(controllerConfigSchema, { LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true', LLMGW_CONTROLLER_LEASE: 'llmgw', LLMGW_CONTROLLER_LEASE_RENEW: '15s' })).toEqual([
      'LLMGW_GRPC_TLS_CERT: is required: the gRPC server presents this certificate (with LLMGW_GRPC_TLS_KEY); set LLMGW_GRPC_INSECURE=true to run without TLS on purpose',
      'LLMGW_CONTROLLER_LEASE_RENEW: must be below LLMGW_CONTROLLER_LEASE_TTL minus 1s (15000 ms)',
    ]);
    expect(envProblems(routerConfigSchema, { LLMGW_ROUTER_CONTROLLER: 'controller:8082', LLMGW_GRPC_TLS_CA: 'tls/ca.crt' })).toEqual(['LLMGW_GRPC_TLS_CA: tls/ca.crt is not an absolute path']);
    expect(() => interpolateCompose('${NOPE:?set it}', {})).toThrow('compose variable NOPE is not set: set it');
    expect(interpolateCompose('a${X:-d}$${Y}', {})).toBe('ad${Y}');
  });
});
