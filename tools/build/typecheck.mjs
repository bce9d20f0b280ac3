#!/usr/bin/env node
// `typecheck` of one project (the target tools/build/nx-targets.plugin.ts gives every project):
// tsc --noEmit over the project's TypeScript files with the root compiler options
// (tsconfig.base.json), and over whatever they import. The project needs no tsconfig of its own:
// the one tsc reads is written under tmp/typecheck/. Usage: node tools/build/typecheck.mjs <projectRoot>
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const project = process.argv[2];
if (!project) {
  process.stderr.write('usage: node tools/build/typecheck.mjs <projectRoot>\n');
  process.exit(2);
}
const config = join(root, 'tmp', 'typecheck', `${project.replaceAll('/', '__')}.tsconfig.json`);
mkdirSync(dirname(config), { recursive: true });
writeFileSync(
  config,
  JSON.stringify({
    extends: join(root, 'tsconfig.base.json'),
    compilerOptions: { noEmit: true },
    include: [join(root, project, '**', '*.ts')],
    exclude: [join(root, project, '**', '__fixtures__', '**'), join(root, '**', 'node_modules', '**')],
  }),
);
const tsc = spawnSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', config], { cwd: root, stdio: 'inherit' });
process.exit(tsc.status ?? 1);
