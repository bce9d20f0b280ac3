import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli';
import type { CliIo } from '../cli-io';
import { catalogValidateCommand } from './catalog-validate.command';

const REPO = resolve(__dirname, '../../../..');
const SAMPLE = join(REPO, 'deploy/catalog.sample.yaml');
const dir = mkdtempSync(join(tmpdir(), 'llmgw-catalog-validate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  writeFileSync(join(dir, name), text);
  return name;
}

const INVALID_YAML = file(
  'invalid.yaml',
  `models:
  - name: a
    source: https://h/a.gguf
    size: 1GB
    replicas: 1
    profiles: [{engine: llamacpp}]
  - name: b
    aliases: [a]
    source: hf://org/repo
    size: 1GB
    replicas: {min: 2, max: 1}
    profiles: [{engine: vllm}]
`,
);
const VALID_JSON = file(
  'valid.json',
  JSON.stringify({
    models: [
      { name: 'a', source: 'https://h/a.gguf', size: '1GB', replicas: { min: 1, max: 2 }, profiles: [{ engine: 'llamacpp' }] },
      { name: 'b', aliases: ['bee'], source: 'hf://org/b@main', size: 2e9, replicas: 3, profiles: [{ engine: 'vllm', gpuClass: 'H100' }] },
    ],
  }),
);

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => (out += t), err: (t) => (err += t), isTTY: false, cwd: dir };
  const code = await runCli([catalogValidateCommand], argv, io);
  return { code, out, err };
}

describe('llmgw catalog validate', () => {
  it('exits 0 with a summary for a valid catalog', async () => {
    const r = await run('catalog', 'validate', '-f', VALID_JSON);
    expect(r.code).toBe(0);
    expect(r.err).toBe('');
    expect(r.out.split('\n')[0]).toBe('valid.json: valid — 2 models, 2 profiles, 4..5 replicas wanted');
    expect(r.out).toMatch(/^b\s+bee\s+3\s+2\.0 GB\s+vllm H100×1$/m);
    expect(r.out).toMatch(/^a\s+-\s+1\.\.2\s+1\.0 GB\s+llamacpp cpu$/m);
  });

  it('prints the summary as JSON with --json', async () => {
    const r = await run('catalog', 'validate', '--json', '--file', VALID_JSON);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({ valid: true, summary: { models: 2, profiles: 2, replicas: { min: 4, max: 5 } } });
    expect(doc.summary.byModel[1]).toEqual({ name: 'b', aliases: ['bee'], replicas: { min: 3, max: 3 }, sizeBytes: 2e9, profiles: ['vllm H100×1'] });
  });

  it('exits 1 with every problem and its path on stderr', async () => {
    const r = await run('catalog', 'validate', '-f', INVALID_YAML);
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe(
      [
        'invalid.yaml: invalid catalog: 4 problems',
        '  models[1].source: "hf://org/repo" must be hf://org/repo[/file]@revision',
        '  models[1].replicas.min: must not exceed max (2 > 1)',
        '  models[1].profiles[0].gpuClass: required for engine vllm',
        '  models[1].aliases[0]: "a" is the name of models[0]',
        '',
      ].join('\n'),
    );
  });

  it('prints problems as JSON with --json', async () => {
    const r = await run('catalog', 'validate', '-f', INVALID_YAML, '--json');
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.out);
    expect(doc.valid).toBe(false);
    expect(doc.problems.map((p: { path: string }) => p.path)).toEqual([
      'models[1].source',
      'models[1].replicas.min',
      'models[1].profiles[0].gpuClass',
      'models[1].aliases[0]',
    ]);
  });

  it('reports a YAML syntax error with its line and column', async () => {
    const name = file('broken.yaml', 'models:\n  - name: a\n    size: [1\n');
    const r = await run('catalog', 'validate', '-f', name);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^broken\.yaml: cannot parse catalog YAML: \d+ errors?\n {2}line \d+, column \d+: /);
  });

  it('refuses a file nested deeper than the catalog limit, naming it, without parsing it', async () => {
    const nested = file('nested.json', `{"models":${'['.repeat(20_000)}${']'.repeat(20_000)}}`);
    const r = await run('catalog', 'validate', '-f', nested);
    expect(r.code).toBe(1);
    expect(r.err).toBe('nested.json: catalog document exceeds the maxDepth limit of 32\n  the document nests deeper than 32 levels; the limit (maxDepth) is 32\n');
    const bomb = file('bomb.yaml', `x: &x [1, 2]\nmodels: [${Array(101).fill('*x').join(', ')}]\n`);
    const json = JSON.parse((await run('catalog', 'validate', '-f', bomb, '--json')).out);
    expect(json).toEqual({ valid: false, problems: [{ path: '', message: 'the document uses more than 100 aliases; the limit (maxAliases) is 100' }] });
  });

  it('exits 1 when the file cannot be read', async () => {
    const r = await run('catalog', 'validate', '-f', 'missing.yaml');
    expect(r.code).toBe(1);
    expect(r.err).toContain('cannot read missing.yaml');
  });

  it.each([
    [['catalog', 'validate'], 'missing -f FILE'],
    [['catalog', 'validate', '-f'], "Option '-f, --file <value>' argument missing"],
    [['catalog', 'validate', '--bogus', '-f', 'x'], "Unknown option '--bogus'"],
    [['catalog', 'validate', 'x.yaml'], 'Unexpected argument'],
  ])('is a usage error (exit 2): %j', async (argv, message) => {
    const r = await run(...argv);
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
    expect(r.err).toContain('usage: llmgw catalog validate -f FILE [--json]');
  });

  it('the real binary exits 0, 1 and 2 and validates the deploy sample', async () => {
    const bin = (...args: string[]) =>
      new Promise<{ code: number; out: string; err: string }>((done) => {
        execFile(process.execPath, [join(REPO, 'tools/bin/llmgw.cjs'), ...args], { cwd: dir }, (e, out, err) =>
          done({ code: e ? ((e as { code?: number }).code ?? -1) : 0, out, err }),
        );
      });
    const [ok, invalid, usage] = await Promise.all([
      bin('catalog', 'validate', '-f', SAMPLE),
      bin('catalog', 'validate', '-f', INVALID_YAML),
      bin('catalog', 'validate'),
    ]);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('valid — 4 models, 6 profiles, 5..7 replicas wanted');
    expect(invalid.code).toBe(1);
    expect(invalid.err).toContain('models[1].profiles[0].gpuClass: required for engine vllm');
    expect(usage.code).toBe(2);
    expect(usage.err).toContain('missing -f FILE');
  });
});
