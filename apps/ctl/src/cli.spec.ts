import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { runCtl } from './test/cli-run';
import { COMMANDS } from './commands';

const rootVersion = (JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')) as { version: string }).version;

describe('llmgw --version', () => {
  it.each([['--version'], ['-V']])('%s prints the package version on stdout and exits 0', async (flag) => {
    const r = await runCtl(COMMANDS, [flag]);
    expect(r).toEqual({ code: 0, out: `llmgw ${rootVersion}\n`, err: '' });
  });

  it('is only a flag on its own: after a command it is that command’s (unknown) option', async () => {
    const r = await runCtl(COMMANDS, ['status', '--version']);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toContain("Unknown option '--version'");
  });

  it('is listed in the usage text', async () => {
    const r = await runCtl(COMMANDS, ['--help']);
    expect(r.out).toContain('llmgw --version');
  });
});
