import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

// Proves the architecture rules are enforced by lint, not by convention: each fixture file
// breaks one rule on purpose and must be reported with the rule that catches it.
const root = resolve(__dirname, '..', '..');

async function lint(file: string): Promise<{ rule: string | null; message: string }[]> {
  const eslint = new ESLint({ cwd: root, ignore: false });
  const [result] = await eslint.lintFiles([resolve(root, file)]);
  return result.messages.map((m) => ({ rule: m.ruleId, message: m.message }));
}

describe('module boundaries', () => {
  beforeAll(() => {
    // @nx/enforce-module-boundaries reads the cached project graph; build it first.
    execFileSync(process.execPath, [resolve(root, 'node_modules/nx/dist/bin/nx.js'), 'show', 'projects'], {
      cwd: root,
      env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true' },
      stdio: 'ignore',
    });
  }, 120_000);

  it('reports a pure lib importing typeorm, nest, node:fs, process.env, the clock, timers and randomness', async () => {
    const messages = await lint('libs/placement/src/__fixtures__/boundary-violation.ts');
    const text = messages.map((m) => `${m.rule}: ${m.message}`).join('\n');
    expect(text).toMatch(/@nx\/enforce-module-boundaries: .*type:pure.* not allowed to import "typeorm"/);
    expect(text).toMatch(/@nx\/enforce-module-boundaries: .*type:pure.* not allowed to import "@nestjs\/core"/);
    expect(text).toMatch(/no-restricted-imports: 'node:fs' import is restricted/);
    expect(text).toMatch(/no-restricted-properties: 'process.env'/);
    expect(text).toMatch(/no-restricted-properties: 'Date.now'/);
    expect(text).toMatch(/no-restricted-properties: 'Math.random'/);
    expect(text).toMatch(/no-restricted-imports: 'randomUUID' import from 'node:crypto' is restricted/);
    expect(text).toMatch(/no-restricted-properties: 'crypto.getRandomValues'/);
    expect(text).toMatch(/no-restricted-globals: Unexpected use of 'setTimeout'/);
  }, 60_000);

  it('reports libs/control importing a framework or the store, keeping a timer or drawing Math.random', async () => {
    const messages = await lint('libs/control/src/__fixtures__/boundary-violation.ts');
    const text = messages.map((m) => `${m.rule}: ${m.message}`).join('\n');
    expect(text).toMatch(/@nx\/enforce-module-boundaries: .*type:pure.* not allowed to import "@nestjs\/common"/);
    expect(text).toMatch(/@nx\/enforce-module-boundaries: .*lib:control/);
    expect(text).toMatch(/no-restricted-globals: Unexpected use of 'setTimeout'/);
    expect(text).toMatch(/no-restricted-globals: Unexpected use of 'setInterval'/);
    expect(text).toMatch(/no-restricted-properties: 'Math.random'/);
  }, 60_000);

  it('reports placement depending on the store', async () => {
    const messages = await lint('libs/placement/src/__fixtures__/imports-store.ts');
    expect(messages).toContainEqual(
      expect.objectContaining({ rule: '@nx/enforce-module-boundaries', message: expect.stringContaining('lib:placement') }),
    );
  }, 60_000);

  it('reports production code importing @llmgw/testing', async () => {
    const messages = await lint('libs/catalog/src/__fixtures__/imports-testing.ts');
    expect(messages.map((m) => m.rule)).toContain('no-restricted-imports');
  }, 60_000);

  it('reports an app importing another app', async () => {
    const messages = await lint('apps/router/src/__fixtures__/imports-app.ts');
    expect(messages).toContainEqual(
      expect.objectContaining({ rule: '@nx/enforce-module-boundaries', message: expect.stringContaining('relative or absolute path') }),
    );
  }, 60_000);

  it('accepts the domain lib and the control lib as they are', async () => {
    expect(await lint('libs/domain/src/errors.ts')).toEqual([]);
    expect(await lint('libs/control/src/reconcile.planner.ts')).toEqual([]);
    expect(await lint('libs/control/src/snapshot.builder.ts')).toEqual([]);
  }, 60_000);

  it('accepts the runtime Clock and Scheduler, the one clock and timer a pure lib holds, and hashing with node:crypto', async () => {
    expect(await lint('libs/domain/src/system-time.ts')).toEqual([]);
    expect(await lint('libs/catalog/src/cache-name.ts')).toEqual([]);
  }, 60_000);
});
