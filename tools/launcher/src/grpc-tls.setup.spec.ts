import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { controllerNames, ensureGrpcTls } from './grpc-tls.setup';

const root = mkdtempSync(join(tmpdir(), 'llmgw-launcher-tls-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const NOW = new Date('2026-12-05T00:00:00Z');
const DAY = 86_400_000;
const cert = (file: string): X509Certificate => new X509Certificate(readFileSync(file));
const serial = (file: string): string => cert(file).serialNumber;

describe('controllerNames', () => {
  it.each([
    ['127.0.0.1', ['localhost'], ['127.0.0.1', '::1']],
    ['0.0.0.0', ['localhost'], ['127.0.0.1', '::1']],
    ['::', ['localhost'], ['127.0.0.1', '::1']],
    ['localhost', ['localhost'], ['127.0.0.1', '::1']],
    ['10.1.2.3', ['localhost'], ['127.0.0.1', '::1', '10.1.2.3']],
    ['[fd00::1]', ['localhost'], ['127.0.0.1', '::1', 'fd00::1']],
    ['gpu-box.lan', ['localhost', 'gpu-box.lan'], ['127.0.0.1', '::1']],
  ])('LLMGW_HOST=%s → DNS %j, IP %j', (host, dnsNames, ipAddresses) => expect(controllerNames(host)).toEqual({ dnsNames, ipAddresses }));
});

describe('ensureGrpcTls', () => {
  it('creates a CA and a controller certificate once, 0700/0600, and reuses them on the next start', async () => {
    const data = join(root, 'a');
    const first = await ensureGrpcTls(data, '127.0.0.1', NOW);
    expect(first).toEqual({ caFile: join(data, 'tls', 'ca.crt'), certFile: join(data, 'tls', 'controller.crt'), keyFile: join(data, 'tls', 'controller.key'), outcome: 'created' });
    expect(statSync(join(data, 'tls')).mode & 0o777).toBe(0o700);
    expect(statSync(first.keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(data, 'tls', 'ca.key')).mode & 0o777).toBe(0o600);
    const server = cert(first.certFile);
    expect(server.verify(cert(first.caFile).publicKey)).toBe(true);
    expect(server.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');

    const again = await ensureGrpcTls(data, '0.0.0.0', new Date(NOW.getTime() + DAY));
    expect(again.outcome).toBe('reused');
    expect(serial(again.certFile)).toBe(server.serialNumber);
  });

  it('issues a new controller certificate from the same CA when the host changes or the certificate nears its end', async () => {
    const data = join(root, 'b');
    const first = await ensureGrpcTls(data, '127.0.0.1', NOW);
    const caSerial = serial(first.caFile);
    const moved = await ensureGrpcTls(data, 'gpu-box.lan', NOW);
    expect(moved.outcome).toBe('issued');
    expect(serial(moved.caFile)).toBe(caSerial);
    expect(cert(moved.certFile).subjectAltName).toBe('DNS:localhost, DNS:gpu-box.lan, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    const before = serial(moved.certFile);
    // The certificate lasts a year: with less than a week left it is replaced.
    const late = await ensureGrpcTls(data, 'gpu-box.lan', new Date(NOW.getTime() + 360 * DAY));
    expect(late.outcome).toBe('issued');
    expect(serial(late.certFile)).not.toBe(before);
    expect(serial(late.caFile)).toBe(caSerial);
  });

  it('starts over with a new CA when the CA files are unusable', async () => {
    const data = join(root, 'c');
    const oldCa = serial((await ensureGrpcTls(data, '127.0.0.1', NOW)).caFile);
    writeFileSync(join(data, 'tls', 'ca.key'), 'garbage');
    const next = await ensureGrpcTls(data, '127.0.0.1', NOW);
    expect(next.outcome).toBe('created');
    expect(serial(next.caFile)).not.toBe(oldCa);
    expect(cert(next.certFile).verify(cert(next.caFile).publicKey)).toBe(true);
  });
});
