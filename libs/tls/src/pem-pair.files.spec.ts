import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readPemPair, writePemPair } from './pem-pair.files';

const root = mkdtempSync(join(tmpdir(), 'llmgw-pem-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const mode = (path: string): number => statSync(path).mode & 0o777;
const pair = { certPem: '-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n', keyPem: '-----BEGIN PRIVATE KEY-----\nB\n-----END PRIVATE KEY-----\n' };

describe('writePemPair', () => {
  it('creates the directory 0700 and writes NAME.crt 0644 and NAME.key 0600', () => {
    const dir = join(root, 'a', 'tls');
    const files = writePemPair(dir, 'controller', pair);
    expect(files).toEqual({ certFile: join(dir, 'controller.crt'), keyFile: join(dir, 'controller.key') });
    expect(mode(dir)).toBe(0o700);
    expect(mode(files.certFile)).toBe(0o644);
    expect(mode(files.keyFile)).toBe(0o600);
    expect(readPemPair(dir, 'controller')).toEqual(pair);
  });

  it('refuses to overwrite an existing key or certificate unless asked, and then replaces both', () => {
    const dir = join(root, 'b');
    writePemPair(dir, 'ca', pair);
    const next = { certPem: 'new cert', keyPem: 'new key' };
    expect(() => writePemPair(dir, 'ca', next)).toThrow(`${join(dir, 'ca.key')} exists; refusing to overwrite it`);
    rmSync(join(dir, 'ca.key'));
    expect(() => writePemPair(dir, 'ca', next)).toThrow(`${join(dir, 'ca.crt')} exists; refusing to overwrite it`);
    expect(readFileSync(join(dir, 'ca.crt'), 'utf8')).toBe(pair.certPem);
    writeFileSync(join(dir, 'ca.key'), 'old', { mode: 0o644 });
    writePemPair(dir, 'ca', next, { overwrite: true });
    expect(readPemPair(dir, 'ca')).toEqual(next);
    expect(mode(join(dir, 'ca.key'))).toBe(0o600);
  });

  it('refuses names that are not plain file names', () => {
    expect(() => writePemPair(root, '../escape', pair)).toThrow(/not a usable file name/);
    expect(() => writePemPair(root, '', pair)).toThrow(/not a usable file name/);
  });

  it('readPemPair names the file it cannot read', () => {
    expect(() => readPemPair(join(root, 'none'), 'ca')).toThrow(`cannot read ${join(root, 'none', 'ca.crt')} (ENOENT)`);
  });
});
