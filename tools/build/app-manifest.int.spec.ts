import { describe, expect, it } from 'vitest';
import { appPackageJson, importedPackages, packageNameOf, runtimeDependencies, type RootLockfile } from './app-manifest';

describe('packageNameOf', () => {
  it.each([
    ['@nestjs/common', '@nestjs/common'],
    ['@bufbuild/protobuf/wire', '@bufbuild/protobuf'],
    ['yaml', 'yaml'],
    ['pino/file', 'pino'],
    ['node:fs', undefined],
    ['fs/promises', undefined],
    ['child_process', undefined],
    ['./discovery/discover.command', undefined],
    ['../x', undefined],
    ['/abs/path.js', undefined],
  ])('%s → %s', (specifier, name) => {
    expect(packageNameOf(specifier)).toBe(name);
  });
});

describe('importedPackages', () => {
  it('lists the packages of external imports only, each once, sorted, over every output', () => {
    const metafile = {
      outputs: {
        'dist/apps/agent/main.js': {
          imports: [
            { path: 'zod', external: true },
            { path: '@nestjs/core', external: true },
            { path: 'node:fs', external: true },
            { path: 'libs/config/src/index.ts' },
            { path: '@bufbuild/protobuf/wire', external: true },
          ],
        },
        'dist/apps/agent/discovery/discover.command.js': { imports: [{ path: 'zod', external: true }, { path: 'yaml', external: true }] },
        'dist/apps/agent/main.js.map': { imports: [] },
      },
    };
    expect(importedPackages(metafile)).toEqual(['@bufbuild/protobuf', '@nestjs/core', 'yaml', 'zod']);
  });
});

describe('runtimeDependencies', () => {
  const lock: RootLockfile = {
    packages: {
      '': {},
      'node_modules/@nestjs/core': {
        version: '11.2.10',
        peerDependencies: { '@nestjs/common': '^11', rxjs: '^7', '@nestjs/microservices': '^11' },
        peerDependenciesMeta: { '@nestjs/microservices': { optional: true } },
      },
      'node_modules/@nestjs/common': { version: '11.2.10', peerDependencies: { 'reflect-metadata': '^0.2' } },
      'node_modules/reflect-metadata': { version: '0.2.2' },
      'node_modules/rxjs': { version: '7.8.2' },
      'node_modules/@nestjs/microservices': { version: '11.2.10' },
      'node_modules/typeorm': {
        version: '0.3.31',
        peerDependencies: { pg: '^8', mysql2: '^3', sqlite3: '^5' },
        peerDependenciesMeta: { pg: { optional: true }, mysql2: { optional: true }, sqlite3: { optional: true } },
      },
      'node_modules/pg': { version: '8.23.1' },
      'node_modules/sqlite3': { version: '6.0.1' },
      'node_modules/mysql2': { version: '3.0.0' },
      'node_modules/vitest/node_modules/rxjs': { version: '6.0.0' },
    },
  };

  it('pins each imported package at its top-level lockfile version and adds required peers transitively', () => {
    expect(runtimeDependencies(['@nestjs/core'], lock)).toEqual({
      '@nestjs/common': '11.2.10',
      '@nestjs/core': '11.2.10',
      'reflect-metadata': '0.2.2',
      rxjs: '7.8.2',
    });
  });

  it('adds no optional peer: a driver loaded by name is listed only when the bundle requires it', () => {
    expect(runtimeDependencies(['typeorm'], lock)).toEqual({ typeorm: '0.3.31' });
    expect(runtimeDependencies(['typeorm', 'sqlite3'], lock)).toEqual({ sqlite3: '6.0.1', typeorm: '0.3.31' });
  });

  it('names every imported package the root lockfile does not install', () => {
    expect(() => runtimeDependencies(['zod', 'rxjs', 'left-pad'], lock)).toThrow(
      'the bundle requires packages the root lockfile does not install: zod, left-pad (add them to package.json dependencies)',
    );
  });
});

describe('appPackageJson', () => {
  it("names the program, takes the root's version, licence and engines, and runs main.js as its bin", () => {
    expect(appPackageJson('llmgw', 'llmgw command line', { version: '1.2.3', license: 'Apache-2.0', engines: { node: '>=20.19' } }, { yaml: '2.9.1' })).toEqual({
      name: 'llmgw',
      version: '1.2.3',
      private: true,
      description: 'llmgw command line',
      license: 'Apache-2.0',
      engines: { node: '>=20.19' },
      main: 'main.js',
      bin: { llmgw: 'main.js' },
      dependencies: { yaml: '2.9.1' },
    });
  });
});
