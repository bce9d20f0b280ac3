#!/usr/bin/env node
// Checks the wire contract the way CI does: `buf lint` and `buf format` are clean, and the
// code in libs/proto/src/gen is exactly what `npm run proto` would generate now (byte for
// byte, no missing or extra files). Exits 0 when all hold; otherwise prints every problem,
// naming each stale file, and exits 1. Needs no network: buf and ts-proto come from
// node_modules.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Where buf.gen.yaml writes, relative to the output base. */
const GEN_DIR = join('libs', 'proto', 'src', 'gen');
const BUF = join(ROOT, 'node_modules', '.bin', process.platform === 'win32' ? 'buf.cmd' : 'buf');

/** Runs buf with `args` in the repo root; returns its exit status and combined output. */
function buf(args) {
  const r = spawnSync(BUF, args, { cwd: ROOT, encoding: 'utf8' });
  if (r.error) throw new Error(`cannot run ${relative(ROOT, BUF)} (${r.error.message}); run npm ci`);
  return { status: r.status ?? 1, output: `${r.stdout}${r.stderr}`.trim() };
}

/** Every file below `dir`, as paths relative to it with `/` separators; [] when it is absent. */
function listFiles(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(relative(dir, p).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

/** Compares a fresh generation with the committed one; returns one line per stale file. */
function compareTrees(freshDir, committedDir) {
  const fresh = new Set(listFiles(freshDir));
  const committed = new Set(listFiles(committedDir));
  const problems = [];
  for (const f of fresh) {
    const shown = `${GEN_DIR.split(sep).join('/')}/${f}`;
    if (!committed.has(f)) problems.push(`missing: ${shown}`);
    else if (!readFileSync(join(freshDir, f)).equals(readFileSync(join(committedDir, f)))) problems.push(`stale: ${shown}`);
  }
  for (const f of committed) {
    if (!fresh.has(f)) problems.push(`extra (no .proto generates it): ${GEN_DIR.split(sep).join('/')}/${f}`);
  }
  return problems;
}

function main() {
  if (!existsSync(BUF)) {
    console.error(`proto-check: ${relative(ROOT, BUF)} not found; run npm ci`);
    return 1;
  }
  let failed = false;

  // 1. Lint (buf.yaml: STANDARD) — catches reused field numbers, bad names, missing _UNSPECIFIED.
  const lint = buf(['lint']);
  if (lint.status !== 0) {
    console.error(`proto-check: buf lint failed:\n${lint.output}`);
    failed = true;
  }

  // 2. Formatting, so the contract reads the same whoever edited it last.
  const format = buf(['format', '--diff', '--exit-code']);
  if (format.status !== 0) {
    console.error(`proto-check: .proto files are not formatted (fix: npx buf format -w):\n${format.output}`);
    failed = true;
  }

  // 3. Regenerate into a temporary directory and compare with the committed code.
  const tmp = mkdtempSync(join(tmpdir(), 'llmgw-proto-check-'));
  try {
    const gen = buf(['generate', '--output', tmp]);
    if (gen.status !== 0) {
      console.error(`proto-check: buf generate failed:\n${gen.output}`);
      return 1;
    }
    const problems = compareTrees(join(tmp, GEN_DIR), join(ROOT, GEN_DIR));
    if (problems.length > 0) {
      console.error(`proto-check: generated code is out of date (fix: npm run proto):`);
      for (const p of problems) console.error(`  ${p}`);
      failed = true;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }

  if (!failed) console.log('proto-check: buf lint, buf format and generated code are up to date');
  return failed ? 1 : 0;
}

try {
  process.exitCode = main();
} catch (err) {
  console.error(`proto-check: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
}
