import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

let cachedRoot: string | undefined;

/** Absolute path of the repository root: the nearest folder above this file holding nx.json. */
export function repoRoot(): string {
  if (cachedRoot !== undefined) return cachedRoot;
  let dir = __dirname;
  for (;;) {
    if (existsSync(join(dir, 'nx.json')) && existsSync(join(dir, 'package.json'))) return (cachedRoot = dir);
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`repoRoot: no nx.json above ${__dirname}`);
    dir = parent;
  }
}

/**
 * Folder of real engine/tool outputs committed in the repository (`libs/testing/fixtures`, a
 * copy of the workspace's shared fixtures with their provenance lines), so tests run on a clean clone.
 */
export function fixturesDir(): string {
  return join(repoRoot(), 'libs', 'testing', 'fixtures');
}

/** Absolute path of one committed fixture, e.g. `fixturePath('vllm', 'metrics.prom')`; throws if absent. */
export function fixturePath(...segments: string[]): string {
  const file = resolve(fixturesDir(), ...segments);
  if (!file.startsWith(fixturesDir())) throw new Error(`fixturePath: ${segments.join('/')} leaves the fixtures folder`);
  if (!existsSync(file)) throw new Error(`fixturePath: no fixture ${file}`);
  return file;
}

/**
 * How to run a TypeScript entry of this repository as a real process: `node tools/run.cjs file
 * ...args` with this Node binary. `file` is relative to the repository root or absolute.
 */
export function runTsEntry(file: string, args: readonly string[] = []): { command: string; args: string[] } {
  return { command: process.execPath, args: [join(repoRoot(), 'tools', 'run.cjs'), resolve(repoRoot(), file), ...args] };
}

/** The engine simulator as one executable Node script (an agent's LLMGW_AGENT_SIM_ENGINE). */
export function simEngineExecutable(): string {
  return join(repoRoot(), 'tools', 'sim-engine', 'bin', 'sim-engine');
}
