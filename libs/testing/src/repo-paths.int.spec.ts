import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from './free-port';
import { fixturePath, fixturesDir, repoRoot, runTsEntry } from './repo-paths';

describe('repository paths', () => {
  it('finds the repository root and the committed fixtures', () => {
    expect(JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')).name).toBe('llmgw');
    expect(existsSync(join(fixturesDir(), 'README.md'))).toBe(true);
    expect(readFileSync(fixturePath('llamacpp', 'llama_server_metrics_excerpt.prom'), 'utf8')).toMatch(/^# source: /);
  });

  it('refuses fixtures that are missing or outside the folder', () => {
    expect(() => fixturePath('vllm', 'no-such-file.prom')).toThrow(/no fixture .*no-such-file\.prom/);
    expect(() => fixturePath('..', 'src', 'index.ts')).toThrow(/leaves the fixtures folder/);
  });

  it('runTsEntry runs a file through tools/run.cjs with this node', () => {
    expect(runTsEntry('apps/router/src/main.ts', ['--x'])).toEqual({
      command: process.execPath,
      args: [join(repoRoot(), 'tools', 'run.cjs'), join(repoRoot(), 'apps/router/src/main.ts'), '--x'],
    });
  });
});

describe('freePort', () => {
  it('returns a port that can be bound', async () => {
    const port = await freePort();
    expect(port).toBeGreaterThan(0);
    const { createServer } = await import('node:net');
    const server = createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});
