// A local Nx plugin (nx.json `plugins`): gives every project with a project.json a `test`
// target (vitest on the project's folder, through the root vitest.config.mts) and a `typecheck`
// target (tools/build/typecheck.mjs). `lint` comes from @nx/eslint/plugin and `build` is declared
// by each app (its defaults in nx.json `targetDefaults.build`).
import { dirname } from 'node:path';
import type { CreateNodes, TargetConfiguration } from '@nx/devkit';

/** vitest's own filter: only test files under `{projectRoot}/`. */
const TEST_TARGET: TargetConfiguration = {
  executor: 'nx:run-commands',
  cache: true,
  inputs: ['default', '^default', '{workspaceRoot}/vitest.config.mts', { externalDependencies: ['vitest'] }],
  options: { command: 'vitest run {projectRoot}/ --passWithNoTests' },
  metadata: { description: "Runs the project's vitest files (unit, integration and end-to-end)" },
};

const TYPECHECK_TARGET: TargetConfiguration = {
  executor: 'nx:run-commands',
  cache: true,
  inputs: ['default', '^default', '{workspaceRoot}/tools/build/typecheck.mjs', { externalDependencies: ['typescript'] }],
  options: { command: 'node tools/build/typecheck.mjs {projectRoot}' },
  metadata: { description: "Type-checks the project's TypeScript (and what it imports)" },
};

export const createNodes: CreateNodes = [
  '{apps,libs,tools}/**/project.json',
  (files) => files.map((file) => [file, { projects: { [dirname(file)]: { targets: { test: TEST_TARGET, typecheck: TYPECHECK_TARGET } } } }] as const),
];

export const createNodesV2 = createNodes;
