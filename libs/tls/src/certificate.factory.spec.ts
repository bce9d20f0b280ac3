import 'reflect-metadata'; // before @peculiar/x509, which needs it at load
import { createPrivateKey, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import { CLOCK_SKEW_MS, certificateFits, generateCa, issueCertificate, type PemPair } from './certificate.factory';
import { certificateIdentity } from './peer-identity';

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const now = new Date('2026-12-05T00:00:00Z');
const DAY = 86_400_000;

describe('generateCa', () => {
  it('makes a self-signed P-256 CA valid from now, whose key is PKCS#8 PEM', async () => {
    const ca = await generateCa({ commonName: 'test CA', validDays: 30, now });
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.subject).toBe('CN=test CA');
    expect(cert.issuer).toBe('CN=test CA');
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: 'prime256v1' });
    expect(ca.keyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(cert.checkPrivateKey(createPrivateKey(ca.keyPem))).toBe(true);
    expect(Date.parse(cert.validFrom)).toBe(now.getTime() - CLOCK_SKEW_MS);
    expect(Date.parse(cert.validTo)).toBe(now.getTime() + 30 * DAY);
    const usages = new x509.X509Certificate(ca.certPem).getExtension(x509.KeyUsagesExtension)?.usages ?? 0;
    expect(usages & x509.KeyUsageFlags.keyCertSign).toBe(x509.KeyUsageFlags.keyCertSign);
  });
});

describe('issueCertificate', () => {
  let ca: PemPair;
  const caOnce = async (): Promise<PemPair> => (ca ??= await generateCa({ now }));

  it('issues a server certificate with its SANs and serverAuth, chained to the CA', async () => {
    const ca = await caOnce();
    const pair = await issueCertificate(ca, { commonName: 'controller', dnsNames: ['localhost', 'controller.llmgw'], ipAddresses: ['127.0.0.1', '::1'], usage: 'server', validDays: 10, now });
    const cert = new X509Certificate(pair.certPem);
    expect(cert.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
    expect(cert.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(cert.ca).toBe(false);
    expect(cert.subject).toBe('CN=controller');
    expect(cert.subjectAltName).toBe('DNS:localhost, DNS:controller.llmgw, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(cert.keyUsage).toEqual([SERVER_AUTH]);
    expect(cert.checkPrivateKey(createPrivateKey(pair.keyPem))).toBe(true);
    expect(Date.parse(cert.validTo)).toBe(now.getTime() + 10 * DAY);
  });

  it('gives a client certificate its common name as a DNS SAN and clientAuth; both gets both usages', async () => {
    const ca = await caOnce();
    const client = new X509Certificate((await issueCertificate(ca, { commonName: 'gpu-node-1', usage: 'client', now })).certPem);
    expect(client.subjectAltName).toBe('DNS:gpu-node-1');
    expect(client.keyUsage).toEqual([CLIENT_AUTH]);
    expect(certificateIdentity(client.toLegacyObject() as never)).toBe('gpu-node-1');
    const both = new X509Certificate((await issueCertificate(ca, { commonName: 'router-a', dnsNames: ['router-a.llmgw'], usage: 'both', now })).certPem);
    expect(both.subjectAltName).toBe('DNS:router-a.llmgw, DNS:router-a');
    expect(both.keyUsage).toEqual([SERVER_AUTH, CLIENT_AUTH]);
  });

  it('draws a fresh serial and key each time, and never outlives its CA', async () => {
    const shortCa = await generateCa({ validDays: 2, now });
    const a = await issueCertificate(shortCa, { commonName: 'n', usage: 'client', validDays: 365, now });
    const b = await issueCertificate(shortCa, { commonName: 'n', usage: 'client', now });
    expect(new X509Certificate(a.certPem).serialNumber).not.toBe(new X509Certificate(b.certPem).serialNumber);
    expect(a.keyPem).not.toBe(b.keyPem);
    expect(new X509Certificate(a.certPem).validTo).toBe(new X509Certificate(shortCa.certPem).validTo);
  });

  it("signs with an operator's RSA CA too", async () => {
    const rsa = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 };
    const keys = (await webcrypto.subtle.generateKey(rsa, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
    const caCert = await x509.X509CertificateGenerator.createSelfSigned({
      name: 'CN=operator RSA CA',
      keys,
      signingAlgorithm: rsa,
      notBefore: now,
      notAfter: new Date(now.getTime() + 30 * DAY),
      extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
    });
    const rsaCa = { certPem: caCert.toString('pem'), keyPem: x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY') };
    const leaf = new X509Certificate((await issueCertificate(rsaCa, { commonName: 'controller', dnsNames: ['localhost'], usage: 'server', now })).certPem);
    expect(leaf.verify(new X509Certificate(rsaCa.certPem).publicKey)).toBe(true);
    expect(leaf.issuer).toBe('CN=operator RSA CA');
  });

  it.each([
    ['an empty common name', { commonName: ' ', usage: 'client' as const }, /commonName is empty/],
    ['a bad IP address', { commonName: 'c', ipAddresses: ['300.1.1.1'], usage: 'server' as const }, /"300.1.1.1" is not an IP address/],
    ['a server certificate without a name', { commonName: 'c', usage: 'server' as const }, /at least one DNS name or IP address/],
    ['zero days', { commonName: 'c', usage: 'client' as const, validDays: 0 }, /validDays/],
  ])('refuses %s', async (_, options, error) => {
    await expect(issueCertificate(await caOnce(), { ...options, now })).rejects.toThrow(error);
  });

  it('refuses to sign with a certificate that is not a CA', async () => {
    const leaf = await issueCertificate(await caOnce(), { commonName: 'n', usage: 'client', now });
    await expect(issueCertificate(leaf, { commonName: 'x', usage: 'client', now })).rejects.toThrow(/not a CA/);
  });
});

describe('certificateFits', () => {
  it('accepts a certificate from the CA, with its key, valid long enough, covering the names; refuses otherwise', async () => {
    const ca = await generateCa({ now });
    const other = await generateCa({ now });
    const pair = await issueCertificate(ca, { commonName: 'controller', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'], usage: 'server', validDays: 30, now });
    const fits = { caPem: ca.certPem, dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'], now };
    expect(certificateFits(pair, fits)).toBe(true);
    expect(certificateFits(pair, { ...fits, minValidMs: 29 * DAY })).toBe(true);
    expect(certificateFits(pair, { ...fits, minValidMs: 31 * DAY })).toBe(false);
    expect(certificateFits(pair, { ...fits, now: new Date(now.getTime() + 31 * DAY) })).toBe(false);
    expect(certificateFits(pair, { ...fits, caPem: other.certPem })).toBe(false);
    expect(certificateFits(pair, { ...fits, dnsNames: ['localhost', 'gpu-box'] })).toBe(false);
    expect(certificateFits(pair, { ...fits, ipAddresses: ['10.0.0.1'] })).toBe(false);
    expect(certificateFits({ ...pair, keyPem: other.keyPem }, fits)).toBe(false);
    expect(certificateFits({ ...pair, certPem: 'garbage' }, fits)).toBe(false);
  });
});

describe('certificateIdentity', () => {
  it.each([
    [{ subject: { CN: 'gpu-node-1' } }, 'gpu-node-1'],
    [{ subject: { CN: '' } }, undefined],
    [{ subject: { CN: ['a', 'b'] } }, undefined],
    [{ subject: {}, subjectaltname: 'DNS:gpu-node-1' }, undefined],
    [{}, undefined],
    [undefined, undefined],
  ])('%j → %s', (peer, expected) => expect(certificateIdentity(peer)).toBe(expected));
});
