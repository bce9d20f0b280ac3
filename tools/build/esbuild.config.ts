// esbuild options every app build shares: the `esbuildConfig` of each app's `build` target
// (@nx/esbuild:esbuild, bundle: true, thirdParty: false; defaults in nx.json targetDefaults).
//
// esbuild bundles an app with the workspace libs it imports and leaves node_modules external.
// esbuild alone drops `emitDecoratorMetadata`, which Nest's dependency injection reads at run
// time, so every TypeScript file is first compiled by SWC with decorator metadata on (the
// transform tools/run.cjs and the tests use) and esbuild bundles SWC's output. When the bundle is
// written, the app's package.json and pruned package-lock.json are written beside it (see
// app-manifest.ts): exactly the packages the bundle requires, at the root lockfile's versions.
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { readCachedProjectGraph, workspaceRoot } from '@nx/devkit';
import { createLockFile } from '@nx/js';
import { transform, type Options as SwcOptions } from '@swc/core';
import type { BuildOptions, Plugin } from 'esbuild';
import { appPackageJson, importedPackages, runtimeDependencies, type RootLockfile, type RootPackageJson } from './app-manifest';

/** Each app's program name (its dist package name and `bin`), by the app's folder. */
const PROGRAMS: Record<string, { program: string; description: string }> = {
  'apps/router': { program: 'llmgw-router', description: 'llmgw router: the OpenAI-compatible API' },
  'apps/controller': { program: 'llmgw-controller', description: 'llmgw controller: placement, supervision and endpoint publishing' },
  'apps/catalog': { program: 'llmgw-catalog', description: 'llmgw catalog REST API' },
  'apps/agent': { program: 'llmgw-agent', description: 'llmgw node agent' },
  'apps/ctl': { program: 'llmgw', description: 'llmgw command line' },
};

/** TypeScript with legacy decorators and their metadata; ES modules out, for esbuild to bundle. */
const SWC_OPTIONS: SwcOptions = {
  jsc: {
    target: 'es2022',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    keepClassNames: true,
  },
  sourceMaps: 'inline',
};

/** Hands every .ts file to SWC before esbuild reads it. */
const swcDecoratorMetadata: Plugin = {
  name: 'swc-decorator-metadata',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const { code } = await transform(source, { ...SWC_OPTIONS, filename: args.path });
      return { contents: code, loader: 'js' };
    });
  },
};

/** Writes package.json and package-lock.json into the output folder once the bundle is written. */
const appManifest: Plugin = {
  name: 'app-manifest',
  setup(build) {
    // The imports are read from esbuild's metafile; asked for here, it is not written to dist.
    build.initialOptions.metafile = true;
    build.onEnd(async (result) => {
      if (result.errors.length > 0) return;
      const { metafile } = result;
      if (metafile === undefined) throw new Error('app-manifest: esbuild returned no metafile');
      const entries = build.initialOptions.entryPoints;
      const main = Array.isArray(entries) ? String(typeof entries[0] === 'string' ? entries[0] : entries[0].in) : '';
      const appDir = relative(workspaceRoot, join(workspaceRoot, main)).split('/').slice(0, 2).join('/');
      const app = PROGRAMS[appDir];
      if (app === undefined) throw new Error(`app-manifest: no program name for ${appDir} (add it to PROGRAMS in tools/build/esbuild.config.ts)`);
      const outDir = join(workspaceRoot, build.initialOptions.outdir ?? dirname(build.initialOptions.outfile ?? ''));
      const rootPackage = JSON.parse(await readFile(join(workspaceRoot, 'package.json'), 'utf8')) as RootPackageJson;
      const rootLock = JSON.parse(await readFile(join(workspaceRoot, 'package-lock.json'), 'utf8')) as RootLockfile;
      const packageJson = appPackageJson(app.program, app.description, rootPackage, runtimeDependencies(importedPackages(metafile), rootLock));
      await writeFile(join(outDir, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
      await writeFile(join(outDir, 'package-lock.json'), createLockFile(packageJson, readCachedProjectGraph(), 'npm'));
    });
  },
};

const options: BuildOptions = {
  // `node dist/apps/<app>/main.js`: CommonJS with a .js extension (the executor's default is .cjs).
  outExtension: { '.js': '.js' },
  sourcemap: true,
  target: 'node20',
  // Nest names modules and providers by their class; bundling may rename a class, keepNames keeps `.name`.
  keepNames: true,
  // Every entry can run as a program (the CLI's `bin`).
  banner: { js: '#!/usr/bin/env node' },
  plugins: [swcDecoratorMetadata, appManifest],
};

export default options;
