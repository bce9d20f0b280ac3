import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

// Resolve @llmgw/* from tsconfig.base.json so tests and apps agree on one map.
const base = JSON.parse(readFileSync(resolve(__dirname, 'tsconfig.base.json'), 'utf8'));
const alias = Object.fromEntries(
  Object.entries(base.compilerOptions.paths as Record<string, string[]>).map(([k, v]) => [k, resolve(__dirname, v[0])]),
);

export default defineConfig({
  plugins: [
    // SWC keeps decorator metadata, which Nest's dependency injection needs.
    swc.vite({ module: { type: 'es6' }, jsc: { target: 'es2022', parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true } } }),
  ],
  resolve: { alias },
  test: {
    include: ['apps/**/*.spec.ts', 'libs/**/*.spec.ts', 'tools/**/*.spec.ts', 'apps/**/*.e2e.ts', 'libs/**/*.e2e.ts', 'tools/**/*.e2e.ts'],
    exclude: ['**/node_modules/**', '**/__fixtures__/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Every gRPC connection in the tests runs over TLS with one test PKI per run.
    globalSetup: ['tools/scripts/vitest.global-setup.ts'],
    setupFiles: ['tools/scripts/vitest.setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
  },
});
