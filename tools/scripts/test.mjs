#!/usr/bin/env node
// The one test command (README: `npm test`): the machine's prerequisites (test-prereqs.sh installs
// promtool, redis-server, PostgreSQL and systemd-analyze when missing), lint, typecheck, proto
// checks, then every vitest test. Prints what each step did and ends with
// `N passed, N failed[, N skipped]`, where the prerequisites and the three static checks count as
// one test each and the rest comes from vitest's JSON report. Extra arguments are passed to vitest
// (e.g. `npm test -- libs/catalog`), which skips the static checks but not the prerequisites.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
const env = { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', FORCE_COLOR: process.env.FORCE_COLOR ?? '0' };
const extra = process.argv.slice(2);

let passed = 0;
let failed = 0;
let skipped = 0;
const failures = [];

function step(name, command, args) {
  process.stdout.write(`\n=== ${name}: ${[command, ...args].join(' ')}\n`);
  const r = spawnSync(command, args, { cwd: root, env, stdio: 'inherit' });
  const ok = r.status === 0;
  if (ok) passed++;
  else {
    failed++;
    failures.push(name);
  }
  process.stdout.write(`=== ${name}: ${ok ? 'ok' : `FAILED (exit ${r.status ?? r.signal})`}\n`);
  return ok;
}

step('prerequisites', 'bash', [join(root, 'tools/scripts/test-prereqs.sh')]);

if (extra.length === 0) {
  // The Nx lint rule reads the cached project graph: build it before eslint runs.
  spawnSync(bin('nx'), ['show', 'projects'], { cwd: root, env, stdio: 'ignore' });
  step('lint', bin('eslint'), ['.', '--max-warnings=0']);
  step('typecheck', bin('tsc'), ['-p', 'tsconfig.json', '--noEmit']);
  step('proto', process.execPath, [join(root, 'tools/scripts/proto-check.mjs')]);
}

const report = join(root, 'tmp', 'vitest-report.json');
mkdirSync(dirname(report), { recursive: true });
rmSync(report, { force: true });
process.stdout.write('\n=== tests: vitest run\n');
const vt = spawnSync(bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...extra], {
  cwd: root,
  env,
  stdio: 'inherit',
});
if (existsSync(report)) {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  // A test file that fails to load reports no tests: count it as a failure, not as nothing.
  for (const file of r.testResults ?? []) {
    if (file.status === 'failed' && (file.assertionResults ?? []).length === 0) {
      failed++;
      failures.push(`${file.name} (did not load)`);
    }
    for (const a of file.assertionResults ?? []) if (a.status === 'failed') failures.push(a.fullName);
  }
} else {
  failed++;
  failures.push(`vitest produced no report (exit ${vt.status ?? vt.signal})`);
}

if (failures.length) process.stdout.write(`\nFailed:\n${failures.map((f) => `  - ${f}`).join('\n')}\n`);
process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(failed === 0 && vt.status === 0 ? 0 : 1);
