import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import type { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { catalogConfigSchema } from '../../apps/catalog/src/config/catalog.config';
import { controllerConfigSchema } from '../../apps/controller/src/config/controller.config';
import { routerConfigSchema } from '../../apps/router/src/config/router.config';
import { dockerEnv, dockerInstructions, dockerStages, imageProblems, llmgwImage } from './deploy-checks';
import { testGrpcTlsEnv } from '@llmgw/testing';

// One image per server app (deploy/container/<app>.Dockerfile), built from that app's dist only:
// no Docker engine runs here, so the Dockerfiles are read the way Docker reads them and held to
// what an image may contain (imageProblems: Node 24 base, only dist/apps/<app>/ from the build
// context, npm ci --omit=dev from its lockfile in a build stage, numeric non-root user, node
// main.js). The build context admits only that dist, an Nx target builds the app and then the
// image, and compose and Kubernetes run these images by name. The agent is a systemd unit and
// the CLI an npm package: neither has an image.

const root = resolve(__dirname, '..', '..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');
const VERSION = (JSON.parse(read('package.json')) as { version: string }).version;

const IMAGES = [
  { app: 'router', project: 'router', schema: routerConfigSchema, required: {} },
  // Values only for this test: the controller refuses to start without its gRPC tokens.
  {
    app: 'controller',
    project: 'controller',
    schema: controllerConfigSchema,
    // What a deployment adds: the tokens, and its TLS files (the test PKI's stand in for them).
    required: { LLMGW_CONTROLLER_JOIN_TOKEN: 'b7e2c94f0a1d36e8b7e2c94f', LLMGW_CONTROLLER_ROUTER_TOKEN: '3c8a5f1e9d20b7463c8a5f1e', ...testGrpcTlsEnv() },
  },
  { app: 'catalog', project: 'catalog-api', schema: catalogConfigSchema, required: {} },
];

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: unknown;
  entrypoint?: unknown;
}
const composeServices = (): Record<string, ComposeService> =>
  (parse(read('deploy/compose/compose.yaml'), { merge: true }) as { services: Record<string, ComposeService> }).services;

interface K8sContainer {
  name: string;
  image?: string;
  command?: unknown;
  args?: unknown;
}
const k8sContainers = (): K8sContainer[] =>
  readdirSync(join(root, 'deploy/kubernetes'))
    .filter((f) => /\.ya?ml$/.test(f))
    .flatMap((f) => read(`deploy/kubernetes/${f}`).split(/^---$/m))
    .map((doc) => parse(doc) as { kind?: string; spec?: { template?: { spec: { containers: K8sContainer[] } } } } | null)
    .flatMap((o) => (o?.kind === 'Deployment' ? (o.spec?.template?.spec.containers ?? []) : []));

describe.each(IMAGES.map((i) => [i.app, i] as const))('deploy/container/%s.Dockerfile', (app, { project, schema, required }) => {
  const path = `deploy/container/${app}.Dockerfile`;
  const text = read(path);

  it('copies only its own dist from the build context, installs from its lockfile, runs node main.js as non-root on Node 24', () => {
    expect(imageProblems(text, app)).toEqual([]);
    const stages = dockerStages(dockerInstructions(text));
    expect(stages.map((s) => s.from)).toEqual(['node:24-bookworm-slim', 'node:24-bookworm-slim']);
  });

  it('its build context admits nothing but dist/apps/' + app, () => {
    const rules = read(`${path}.dockerignore`)
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(rules).toEqual(['*', `!dist/apps/${app}/`]);
  });

  it('keeps the data directory on a volume, listens on all addresses and exposes the ports the app listens on', () => {
    const final = dockerStages(dockerInstructions(text)).at(-1)!;
    const env = dockerEnv(final.instructions);
    expect(env).toMatchObject({ LLMGW_HOST: '0.0.0.0', LLMGW_DATA_DIR: '/var/lib/llmgw' });
    const volumes = final.instructions.filter((i) => i.keyword === 'VOLUME').flatMap((i) => JSON.parse(i.args) as string[]);
    expect(volumes).toEqual([env.LLMGW_DATA_DIR]);
    const exposed = final.instructions.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/).map(Number));
    const settings = (schema as z.ZodType).parse({ ...Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith('LLMGW_'))), ...required }) as { port: number; grpcPort?: number };
    expect(exposed.sort()).toEqual([settings.port, ...(settings.grpcPort === undefined ? [] : [settings.grpcPort])].sort());
  });

  it(`has the Nx target ${project}:container, which builds the app first`, () => {
    const targets = (JSON.parse(read(`apps/${app}/project.json`)) as { targets: Record<string, { executor?: string; dependsOn?: string[]; options?: { command?: string } }> }).targets;
    expect(targets.container).toEqual({
      executor: 'nx:run-commands',
      dependsOn: ['build'],
      options: { command: `docker build -f ${path} -t llmgw-${app}:${VERSION} .` },
    });
  });

  it('compose and Kubernetes run this image, built from this Dockerfile, with its own entry point', () => {
    const services = Object.entries(composeServices()).filter(([, s]) => llmgwImage(s.image ?? '')?.app === app);
    expect(services.length).toBeGreaterThan(0);
    for (const [name, s] of services) {
      expect(s.image, name).toBe(`llmgw-${app}:${VERSION}`);
      expect(s.build, name).toEqual({ context: '../..', dockerfile: path });
      expect([s.command, s.entrypoint], name).toEqual([undefined, undefined]);
    }
    const containers = k8sContainers().filter((c) => llmgwImage(c.image ?? '')?.app === app);
    expect(containers).toHaveLength(1);
    expect(containers[0].image).toBe(`registry.example.internal/llmgw-${app}:${VERSION}`);
    expect([containers[0].command, containers[0].args]).toEqual([undefined, undefined]);
  });
});

describe('deploy/container', () => {
  it('holds an image for each server app only: the agent runs as a systemd unit, the CLI installs from npm pack', () => {
    expect(readdirSync(join(root, 'deploy/container')).sort()).toEqual(
      IMAGES.flatMap(({ app }) => [`${app}.Dockerfile`, `${app}.Dockerfile.dockerignore`]).sort(),
    );
  });

  it("the repository's own .dockerignore admits only dist/apps/, for builders that do not read the per-Dockerfile one", () => {
    const rules = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(rules).toEqual(['*', '!dist/apps/']);
  });

  it('every llmgw image compose and Kubernetes name is one of these', () => {
    const named = [...Object.values(composeServices()).map((s) => s.image ?? ''), ...k8sContainers().map((c) => c.image ?? '')].filter((i) => /llmgw/.test(i));
    expect(named.length).toBeGreaterThan(0);
    for (const image of named) expect(IMAGES.map((i) => i.app), image).toContain(llmgwImage(image)?.app);
  });

  it("the controller image sizes V8's heap itself, with flags Node accepts in NODE_OPTIONS, below the Kubernetes memory limit", () => {
    const options = dockerEnv(dockerInstructions(read('deploy/container/controller.Dockerfile')))['NODE_OPTIONS'] ?? '';
    const oldSpace = Number(/--max-old-space-size=(\d+)/.exec(options)?.[1]);
    expect(oldSpace).toBeGreaterThan(0);
    expect(options).toMatch(/--max-semi-space-size=\d+/);
    // Node refuses a flag NODE_OPTIONS may not carry ("is not allowed in NODE_OPTIONS").
    const run = spawnSync(process.execPath, ['-e', "process.stdout.write(String(require('v8').getHeapStatistics().heap_size_limit))"], {
      env: { PATH: process.env['PATH'] ?? '', NODE_OPTIONS: options },
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(Number(run.stdout) / 2 ** 20).toBeLessThan(oldSpace * 1.2);
    const manifest = parse(read('deploy/kubernetes/10-controller.yaml').split(/^---$/m).find((d) => /kind: Deployment/.test(d)) as string) as {
      spec: { template: { spec: { containers: { name: string; resources?: { limits?: { memory?: string } } }[] } } };
    };
    const limit = manifest.spec.template.spec.containers.map((c) => c.resources?.limits?.memory).find((m) => m !== undefined) as string;
    const limitMiB = Number(/^(\d+)Gi$/.exec(limit)?.[1]) * 1024 || Number(/^(\d+)Mi$/.exec(limit)?.[1]);
    // The heap is not all of the process: code, native buffers and the node binary come on top.
    expect(oldSpace).toBeLessThanOrEqual(limitMiB / 2);
  });

  it('reports what an image must not do (the check is not vacuous)', () => {
    const router = read('deploy/container/router.Dockerfile');
    const changed = (from: string, to: string): string[] => {
      expect(router).toContain(from);
      return imageProblems(router.replace(from, to), 'router');
    };
    expect(imageProblems(router, 'controller')).toEqual([
      'COPY dist/apps/router/package.json dist/apps/router/package-lock.json ./: dist/apps/router/package.json is not under dist/apps/controller/',
      'COPY dist/apps/router/package.json dist/apps/router/package-lock.json ./: dist/apps/router/package-lock.json is not under dist/apps/controller/',
      'COPY dist/apps/router/ ./: dist/apps/router/ is not under dist/apps/controller/',
      'no build stage copies dist/apps/controller/package.json and package-lock.json and then runs npm ci --omit=dev',
      'final stage: does not copy dist/apps/controller/',
    ]);
    expect(changed('NODE_IMAGE=node:24-bookworm-slim', 'NODE_IMAGE=node:20-bookworm-slim')).toEqual([
      'stage 1: FROM node:20-bookworm-slim is not a Node 24 image',
      'stage 2: FROM node:20-bookworm-slim is not a Node 24 image',
    ]);
    expect(changed('COPY dist/apps/router/ ./', 'COPY dist/apps/router/ ./\nCOPY libs ./libs')).toEqual(['COPY libs ./libs: libs is not under dist/apps/router/']);
    expect(changed('COPY dist/apps/router/ ./', 'COPY . ./')).toEqual(['COPY . ./: . is not under dist/apps/router/', 'final stage: does not copy dist/apps/router/']);
    expect(changed('COPY --from=deps /opt/llmgw/node_modules ./node_modules', 'COPY --from=deps /opt/llmgw ./')).toEqual([
      'COPY --from=deps /opt/llmgw ./: only node_modules may come from another stage, not /opt/llmgw',
    ]);
    expect(changed('npm ci --omit=dev', 'npm install')).toEqual([
      'no build stage copies dist/apps/router/package.json and package-lock.json and then runs npm ci --omit=dev',
      'RUN npm install --no-audit --no-fund && npm cache clean --force: install from the lockfile (npm ci), not npm install',
    ]);
    expect(changed('USER 10001:10001', 'USER 0:0')).toEqual(['final stage: USER 0 is root']);
    expect(changed('USER 10001:10001', 'USER llmgw')).toEqual(['final stage: USER llmgw is not a numeric uid:gid']);
    expect(changed('ENTRYPOINT ["node", "main.js"]', 'ENTRYPOINT ["node", "/opt/llmgw/tools/run.cjs"]\nCMD ["apps/router/src/main.ts"]')).toEqual([
      'final stage: ENTRYPOINT ["node", "/opt/llmgw/tools/run.cjs"] is not ["node", "main.js"]',
      'final stage: CMD given: the image runs one app, with no arguments',
    ]);
    expect(changed('WORKDIR /opt/llmgw\nCOPY --from', 'WORKDIR /opt/llmgw\nRUN apt-get update && apt-get install -y g++\nCOPY --from')).toEqual([
      'final stage: RUN apt-get update && apt-get install -y g++: installs belong in a build stage',
    ]);
  });
});
