// X.509 certificates for gRPC TLS: a local CA and the server and client certificates it signs.
// node:crypto parses and verifies certificates but cannot create one (it has no X.509 encoder or
// CSR signing), so @peculiar/x509 builds them on Node's WebCrypto; keys are ECDSA P-256.
import 'reflect-metadata'; // @peculiar/x509 resolves its algorithms through tsyringe, which needs it
import { createPrivateKey, randomBytes, webcrypto, X509Certificate as NodeX509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';

/** A certificate and its private key, both PEM (the key PKCS#8, `-----BEGIN PRIVATE KEY-----`). */
export interface PemPair {
  certPem: string;
  keyPem: string;
}

/** What a certificate may be used for: a TLS server, a TLS client (mTLS), or both. */
export type CertificateUsage = 'server' | 'client' | 'both';

/** Days a CA made by {@link generateCa} is valid by default (10 years). */
export const DEFAULT_CA_DAYS = 3_650;
/** Days a certificate made by {@link issueCertificate} is valid by default. */
export const DEFAULT_CERT_DAYS = 365;
/** How far before `now` a certificate's validity starts, so clocks a little behind still accept it. */
export const CLOCK_SKEW_MS = 5 * 60_000;

const DAY_MS = 86_400_000;
const EC_KEY: webcrypto.EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-256' };
const EC_SIGN = { name: 'ECDSA', hash: 'SHA-256' };
const subtle = webcrypto.subtle;
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/**
 * A self-signed CA: basicConstraints CA:true (critical, path length 0: it signs leaf
 * certificates only), keyUsage keyCertSign + cRLSign, an ECDSA P-256 key. Valid from `now`
 * (less {@link CLOCK_SKEW_MS}) for `validDays` (default {@link DEFAULT_CA_DAYS}).
 */
export async function generateCa(options: { commonName?: string; validDays?: number; now: Date }): Promise<PemPair> {
  const keys = (await subtle.generateKey(EC_KEY, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: [{ CN: [options.commonName ?? 'llmgw local CA'] }],
    ...validity(options.now, options.validDays ?? DEFAULT_CA_DAYS),
    signingAlgorithm: EC_SIGN,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
}

/**
 * A certificate signed by `ca`, for a new ECDSA P-256 key. Subject CN = `commonName`; subject
 * alternative names: `dnsNames` and `ipAddresses`, and for a client (or `both`) the
 * `commonName` as a DNS name too (a node id or router id, which the server compares with what
 * a call claims). extendedKeyUsage serverAuth and/or clientAuth after `usage`; a random 127-bit
 * serial; valid from `now` (less {@link CLOCK_SKEW_MS}) for `validDays` (default
 * {@link DEFAULT_CERT_DAYS}), never past the CA's own end. The CA key may be ECDSA P-256/P-384
 * or RSA (an operator's own CA). Throws on an empty common name, a bad IP address, a server
 * certificate without any name, or a CA that is not one.
 */
export async function issueCertificate(
  ca: PemPair,
  options: { commonName: string; dnsNames?: string[]; ipAddresses?: string[]; usage: CertificateUsage; validDays?: number; now: Date },
): Promise<PemPair> {
  const commonName = options.commonName.trim();
  if (commonName === '') throw new Error('issueCertificate: commonName is empty');
  for (const ip of options.ipAddresses ?? []) if (isIP(ip) === 0) throw new Error(`issueCertificate: ${JSON.stringify(ip)} is not an IP address`);
  const client = options.usage !== 'server';
  const server = options.usage !== 'client';
  const dnsNames = [...new Set([...(options.dnsNames ?? []), ...(client ? [commonName] : [])])];
  const ipAddresses = [...new Set(options.ipAddresses ?? [])];
  if (server && dnsNames.length === 0 && ipAddresses.length === 0) {
    throw new Error('issueCertificate: a server certificate needs at least one DNS name or IP address (clients check the name they dial)');
  }
  const caCert = new x509.X509Certificate(ca.certPem);
  const caBasic = caCert.getExtension(x509.BasicConstraintsExtension);
  if (!caBasic?.ca) throw new Error('issueCertificate: the CA certificate is not a CA (basicConstraints CA:true missing)');
  const { algorithm, sign } = signingAlgorithmOf(ca.keyPem);
  const signingKey = await subtle.importKey('pkcs8', pemBody(ca.keyPem), algorithm, false, ['sign']);
  const keys = (await subtle.generateKey(EC_KEY, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const { notBefore, notAfter } = validity(options.now, options.validDays ?? DEFAULT_CERT_DAYS);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: [{ CN: [commonName] }],
    issuer: caCert.subjectName,
    notBefore,
    notAfter: notAfter < caCert.notAfter ? notAfter : caCert.notAfter,
    signingAlgorithm: sign,
    publicKey: keys.publicKey,
    signingKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([...(server ? [x509.ExtendedKeyUsage.serverAuth] : []), ...(client ? [x509.ExtendedKeyUsage.clientAuth] : [])]),
      new x509.SubjectAlternativeNameExtension([
        ...dnsNames.map((value) => ({ type: 'dns' as const, value })),
        ...ipAddresses.map((value) => ({ type: 'ip' as const, value })),
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
}

/**
 * Whether `certPem` can keep serving: signed by `caPem`, its key is `keyPem`, valid at `now` and
 * for at least `minValidMs` more, and its SANs cover every name in `dnsNames` and `ipAddresses`.
 * Anything unparsable is false. Used to reuse generated certificates across restarts.
 */
export function certificateFits(
  pair: PemPair,
  options: { caPem: string; dnsNames?: string[]; ipAddresses?: string[]; now: Date; minValidMs?: number },
): boolean {
  try {
    const cert = new NodeX509Certificate(pair.certPem);
    const ca = new NodeX509Certificate(options.caPem);
    if (!cert.verify(ca.publicKey) || !cert.checkPrivateKey(createPrivateKey(pair.keyPem))) return false;
    const now = options.now.getTime();
    if (Date.parse(cert.validFrom) > now || Date.parse(cert.validTo) < now + (options.minValidMs ?? 0)) return false;
    const hostOptions = { subject: 'never' as const, wildcards: false };
    return (
      (options.dnsNames ?? []).every((name) => cert.checkHost(name, hostOptions) === name) &&
      (options.ipAddresses ?? []).every((ip) => cert.checkIP(ip) !== undefined)
    );
  } catch {
    return false;
  }
}

function validity(now: Date, days: number): { notBefore: Date; notAfter: Date } {
  if (!Number.isInteger(days) || days < 1) throw new Error(`validDays must be a whole number of days ≥ 1 (got ${days})`);
  return { notBefore: new Date(now.getTime() - CLOCK_SKEW_MS), notAfter: new Date(now.getTime() + days * DAY_MS) };
}

/** 16 random bytes, the top bit cleared so the DER integer stays positive and the first byte non-zero so it stays 16 bytes long. */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] & 0x7f) | 0x01;
  return bytes.toString('hex');
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

function pemBody(pem: string): ArrayBuffer {
  const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
  return der.buffer.slice(der.byteOffset, der.byteOffset + der.byteLength) as ArrayBuffer;
}

/** The WebCrypto import and signing parameters for a CA key (read with node:crypto, which knows every PEM form). */
function signingAlgorithmOf(keyPem: string): { algorithm: webcrypto.EcKeyImportParams | webcrypto.RsaHashedImportParams; sign: webcrypto.Algorithm | webcrypto.EcdsaParams } {
  const key = createPrivateKey(keyPem);
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'ec' && details.namedCurve === 'prime256v1') return { algorithm: EC_KEY, sign: EC_SIGN };
  if (key.asymmetricKeyType === 'ec' && details.namedCurve === 'secp384r1') {
    return { algorithm: { name: 'ECDSA', namedCurve: 'P-384' }, sign: { name: 'ECDSA', hash: 'SHA-384' } as webcrypto.EcdsaParams };
  }
  if (key.asymmetricKeyType === 'rsa') {
    return { algorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, sign: { name: 'RSASSA-PKCS1-v1_5' } };
  }
  throw new Error(`issueCertificate: unsupported CA key (${key.asymmetricKeyType} ${details.namedCurve ?? ''}); use ECDSA P-256/P-384 or RSA`.replace(' )', ')'));
}
