// What a built app's dist/apps/<app>/package.json lists: exactly the npm packages its bundle
// requires at run time (read from esbuild's metafile), plus the peers those packages need, at
// the versions the root lockfile holds. Pure: the esbuild plugin (esbuild.config.ts) does the I/O.
import { isBuiltin } from 'node:module';

/** The part of esbuild's metafile read here: each output's imports, external ones marked. */
export interface BundleMetafile {
  outputs: Record<string, { imports: { path: string; external?: boolean }[] }>;
}

/** One entry of an npm v2/v3 lockfile's `packages` map. */
export interface LockedPackage {
  version?: string;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** The part of the root package-lock.json read here. */
export interface RootLockfile {
  packages: Record<string, LockedPackage>;
}

/** The fields of the root package.json a built app's manifest inherits. */
export interface RootPackageJson {
  version: string;
  dependencies?: Record<string, string>;
  license?: string;
  engines?: Record<string, string>;
}

/** A built app's package.json. `bin` names the program; `main.js` is its entry. */
export interface AppPackageJson {
  name: string;
  version: string;
  private: true;
  description: string;
  license?: string;
  engines?: Record<string, string>;
  main: 'main.js';
  bin: Record<string, 'main.js'>;
  dependencies: Record<string, string>;
}

/**
 * The npm package a bare import specifier names (`@scope/pkg/sub` → `@scope/pkg`, `pkg/sub` →
 * `pkg`); undefined for Node built-ins and for relative or absolute paths.
 */
export function packageNameOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || isBuiltin(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** The npm packages the bundle's outputs require (external imports only), sorted, each once. */
export function importedPackages(metafile: BundleMetafile): string[] {
  const names = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const imported of output.imports) {
      if (!imported.external) continue;
      const name = packageNameOf(imported.path);
      if (name !== undefined) names.add(name);
    }
  }
  return [...names].sort();
}

/**
 * `imported` with the exact version of each from the root lockfile, plus (transitively) their
 * required peer dependencies. Optional peers are left out: a module a package loads by name at
 * run time only if asked (TypeORM its database drivers and ioredis) must be required by our code
 * where it is chosen, which puts it in the bundle's imports. Throws naming every imported package
 * the lockfile does not hold at top level (missing from the root package.json).
 */
export function runtimeDependencies(imported: readonly string[], lock: RootLockfile): Record<string, string> {
  const missing = imported.filter((name) => lock.packages[`node_modules/${name}`]?.version === undefined);
  if (missing.length > 0) {
    throw new Error(`the bundle requires packages the root lockfile does not install: ${missing.join(', ')} (add them to package.json dependencies)`);
  }
  const deps: Record<string, string> = {};
  const queue = [...imported];
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    const locked = lock.packages[`node_modules/${name}`];
    if (deps[name] !== undefined || locked?.version === undefined) continue;
    deps[name] = locked.version;
    for (const peer of Object.keys(locked.peerDependencies ?? {})) {
      if (!locked.peerDependenciesMeta?.[peer]?.optional) queue.push(peer);
    }
  }
  return Object.fromEntries(Object.entries(deps).sort(([a], [b]) => a.localeCompare(b)));
}

/** The dist package.json of the app whose program is `program` (e.g. `llmgw-router`, `llmgw`). */
export function appPackageJson(program: string, description: string, root: RootPackageJson, dependencies: Record<string, string>): AppPackageJson {
  return {
    name: program,
    version: root.version,
    private: true,
    description,
    ...(root.license !== undefined ? { license: root.license } : {}),
    ...(root.engines !== undefined ? { engines: root.engines } : {}),
    main: 'main.js',
    bin: { [program]: 'main.js' },
    dependencies,
  };
}
