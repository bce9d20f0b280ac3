import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli';
import type { CliIo } from '../cli-io';
import { COMMANDS } from './index';
import { createCertsInitCommand, createCertsIssueCommand } from './certs.command';

const root = mkdtempSync(join(tmpdir(), 'llmgw-certs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const NOW = new Date('2026-12-05T00:00:00Z');
const commands = [createCertsInitCommand({ now: () => NOW }), createCertsIssueCommand({ now: () => NOW })];
let n = 0;

async function run(cwd: string, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { out: (t) => (out += t), err: (t) => (err += t), isTTY: false, cwd };
  return { code: await runCli(commands, argv, io), out, err };
}
const fresh = (): string => join(root, `case-${++n}`);
const cert = (file: string): X509Certificate => new X509Certificate(readFileSync(file));
const mode = (file: string): number => statSync(file).mode & 0o777;

describe('llmgw certs', () => {
  it('is registered with the other commands', () => {
    expect(COMMANDS.map((c) => c.path.join(' '))).toEqual(expect.arrayContaining(['certs init', 'certs issue']));
  });

  it('init makes a CA in ./.llmgw/tls by default, 0700 directory, 0600 key, and refuses to overwrite it', async () => {
    const cwd = fresh();
    const r = await run(root, 'certs', 'init', '--dir', cwd);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toContain(`CA written: ${join(cwd, 'ca.crt')}, ${join(cwd, 'ca.key')}`);
    expect(cert(join(cwd, 'ca.crt')).ca).toBe(true);
    expect(mode(cwd)).toBe(0o700);
    expect(mode(join(cwd, 'ca.key'))).toBe(0o600);
    const before = readFileSync(join(cwd, 'ca.key'), 'utf8');

    const again = await run(root, 'certs', 'init', '--dir', cwd);
    expect(again.code).toBe(1);
    expect(again.err).toContain(`${join(cwd, 'ca.key')} exists; refusing to overwrite it`);
    expect(readFileSync(join(cwd, 'ca.key'), 'utf8')).toBe(before);

    const byDefault = fresh();
    expect((await run(byDefault, 'certs', 'init', '--json')).code).toBe(0);
    expect(existsSync(join(byDefault, '.llmgw', 'tls', 'ca.key'))).toBe(true);
  });

  it('issue writes a server certificate chained to the CA with the --host and --ip SANs', async () => {
    const dir = fresh();
    await run(root, 'certs', 'init', '--dir', dir);
    const r = await run(root, 'certs', 'issue', 'controller', '--dir', dir, '--host', 'controller.llmgw.internal', '--host', 'localhost', '--ip', '10.0.0.5', '--ip', '::1', '--days', '30');
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(r.out).toContain(`LLMGW_GRPC_TLS_CERT=${join(dir, 'controller.crt')} LLMGW_GRPC_TLS_KEY=${join(dir, 'controller.key')}`);
    const c = cert(join(dir, 'controller.crt'));
    expect(c.verify(cert(join(dir, 'ca.crt')).publicKey)).toBe(true);
    expect(c.subject).toBe('CN=controller');
    expect(c.subjectAltName).toBe('DNS:controller.llmgw.internal, DNS:localhost, IP Address:10.0.0.5, IP Address:0:0:0:0:0:0:0:1');
    expect(c.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(Date.parse(c.validTo)).toBe(NOW.getTime() + 30 * 86_400_000);
    expect(mode(join(dir, 'controller.key'))).toBe(0o600);
    expect(mode(join(dir, 'controller.crt'))).toBe(0o644);
  });

  it('issue --client names the node id in CN and SAN, for clientAuth; --json tells where', async () => {
    const dir = fresh();
    await run(root, 'certs', 'init', '--dir', dir);
    const r = await run(root, 'certs', 'issue', 'gpu-node-1', '--client', '--dir', dir, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ name: 'gpu-node-1', usage: 'client', certFile: join(dir, 'gpu-node-1.crt'), keyFile: join(dir, 'gpu-node-1.key'), caFile: join(dir, 'ca.crt') });
    const c = cert(join(dir, 'gpu-node-1.crt'));
    expect(c.verify(cert(join(dir, 'ca.crt')).publicKey)).toBe(true);
    expect(c.subject).toBe('CN=gpu-node-1');
    expect(c.subjectAltName).toBe('DNS:gpu-node-1');
    expect(c.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    expect(mode(join(dir, 'gpu-node-1.key'))).toBe(0o600);

    const both = await run(root, 'certs', 'issue', 'router-a', '--both', '--host', 'router-a.llmgw', '--dir', dir);
    expect(both.code).toBe(0);
    expect(cert(join(dir, 'router-a.crt')).keyUsage).toEqual(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
  });

  it('issue refuses to replace a certificate unless --force, and fails clearly without a CA', async () => {
    const dir = fresh();
    const noCa = await run(root, 'certs', 'issue', 'controller', '--ip', '127.0.0.1', '--dir', dir);
    expect(noCa.code).toBe(1);
    expect(noCa.err).toContain(`no CA in ${dir}`);
    expect(noCa.err).toContain('llmgw certs init');

    await run(root, 'certs', 'init', '--dir', dir);
    expect((await run(root, 'certs', 'issue', 'controller', '--ip', '127.0.0.1', '--dir', dir)).code).toBe(0);
    const serial = cert(join(dir, 'controller.crt')).serialNumber;
    const again = await run(root, 'certs', 'issue', 'controller', '--ip', '127.0.0.1', '--dir', dir);
    expect(again.code).toBe(1);
    expect(again.err).toContain('refusing to overwrite it (pass --force to replace it)');
    expect((await run(root, 'certs', 'issue', 'controller', '--ip', '127.0.0.1', '--dir', dir, '--force')).code).toBe(0);
    expect(cert(join(dir, 'controller.crt')).serialNumber).not.toBe(serial);
  });

  it.each([
    [['certs', 'issue'], 'missing NAME'],
    [['certs', 'issue', 'a', 'b', '--client'], "unexpected argument 'b'"],
    [['certs', 'issue', 'ca', '--client'], 'NAME must not be "ca"'],
    [['certs', 'issue', '../x', '--client'], 'NAME must be letters, digits'],
    [['certs', 'issue', 'controller'], 'a server certificate needs --host and/or --ip'],
    [['certs', 'issue', 'n', '--client', '--server'], 'at most one of --client, --server, --both'],
    [['certs', 'issue', 'controller', '--host', '10.0.0.1'], '--host 10.0.0.1 is an IP address: use --ip'],
    [['certs', 'issue', 'controller', '--host', 'http://x'], 'is not a host name'],
    [['certs', 'issue', 'controller', '--ip', 'localhost'], '--ip "localhost" is not an IP address'],
    [['certs', 'init', '--days', '0'], '--days must be a whole number of days from 1'],
  ])('%j is a usage error (exit 2)', async (argv, message) => {
    const r = await run(fresh(), ...argv);
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
  });
});
