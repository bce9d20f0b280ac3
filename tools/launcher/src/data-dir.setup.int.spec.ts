import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureAdminToken, ensurePrivateDataDir, ensureTinyModel, findOnPath } from './data-dir.setup';

const REPO = resolve(__dirname, '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'llmgw-datadir-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ensurePrivateDataDir', () => {
  it('creates the directory 0700, and narrows one an older version left 0755', () => {
    const data = join(dir, 'fresh', '.llmgw');
    expect(ensurePrivateDataDir(data)).toEqual({ narrowed: false });
    expect(statSync(data).mode & 0o777).toBe(0o700);
    chmodSync(data, 0o755);
    expect(ensurePrivateDataDir(data)).toEqual({ narrowed: true });
    expect(statSync(data).mode & 0o777).toBe(0o700);
  });
});

describe('ensureTinyModel', () => {
  it('generates the GGUF once, then leaves the file alone', () => {
    const file = join(dir, 'models', 'llmgw-tiny.gguf');
    const first = ensureTinyModel(file, REPO, process.execPath);
    expect(first.created).toBe(true);
    expect(first.bytes).toBeGreaterThan(100_000);
    expect(readFileSync(file).subarray(0, 4).toString('latin1')).toBe('GGUF');
    writeFileSync(file, 'an operator put another model here');
    expect(ensureTinyModel(file, REPO, process.execPath)).toEqual({ bytes: 34, created: false });
  }, 60_000);
});

describe('ensureAdminToken', () => {
  it('creates a private token once and reuses it; refuses a file that holds no usable token', () => {
    const file = join(dir, 'token');
    const token = ensureAdminToken(file);
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(ensureAdminToken(file)).toBe(token);
    writeFileSync(file, 'short\n');
    expect(() => ensureAdminToken(file)).toThrow(`${file} does not hold a usable token`);
  });
});

describe('findOnPath', () => {
  it('finds an executable file, skipping relative entries and non-executables', () => {
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'llama-server'), '#!/bin/sh\n');
    expect(findOnPath('llama-server', `relative:${bin}`)).toBeUndefined();
    chmodSync(join(bin, 'llama-server'), 0o755);
    expect(findOnPath('llama-server', `relative:${bin}`)).toBe(join(bin, 'llama-server'));
    expect(findOnPath('llama-server', undefined)).toBeUndefined();
  });
});
