// The local CA and the controller's gRPC server certificate the launcher keeps in the data
// directory, so `npm start` runs gRPC over TLS with nothing to set.
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { certificateFits, generateCa, issueCertificate, pemPairFiles, readPemPair, writePemPair, type PemPair } from '@llmgw/tls';

/** Where the launcher keeps its TLS files, inside the data directory (mode 0700). */
export const TLS_DIR_RELATIVE = 'tls';
/** A certificate with less than this left is replaced at start. */
const MIN_VALID_MS = 7 * 86_400_000;

/** The files the apps are given, and what this start did about them. */
export interface GrpcTlsFiles {
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** `reused`: both were there and fit; `issued`: a new server certificate from the existing CA; `created`: a new CA too. */
  readonly outcome: 'reused' | 'issued' | 'created';
}

/**
 * The names the controller's certificate must carry for clients on this machine: localhost,
 * 127.0.0.1 and ::1, plus `host` (LLMGW_HOST) when it is something else and not a wildcard
 * (a wildcard bind is dialed on loopback).
 */
export function controllerNames(host: string): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames = ['localhost'];
  const ipAddresses = ['127.0.0.1', '::1'];
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (bare === '' || bare === '0.0.0.0' || bare === '::') return { dnsNames, ipAddresses };
  if (isIP(bare) !== 0) {
    if (!ipAddresses.includes(bare)) ipAddresses.push(bare);
  } else if (!dnsNames.includes(bare.toLowerCase())) {
    dnsNames.push(bare);
  }
  return { dnsNames, ipAddresses };
}

/**
 * Makes sure `<dataDir>/tls` holds a CA (`ca.crt`, `ca.key`) and a controller server certificate
 * (`controller.crt`, `controller.key`) that fits `host` at `now`: both reused when the certificate
 * is signed by the CA, has its key, names every address of {@link controllerNames} and has a week
 * or more left; a new certificate from the same CA when only it does not fit; a new CA and
 * certificate when the CA is missing, unreadable or has less than a week left. Keys are 0600.
 */
export async function ensureGrpcTls(dataDir: string, host: string, now: Date): Promise<GrpcTlsFiles> {
  const dir = join(dataDir, TLS_DIR_RELATIVE);
  const names = controllerNames(host);
  const caFiles = pemPairFiles(dir, 'ca');
  const serverFiles = pemPairFiles(dir, 'controller');
  const files = { caFile: caFiles.certFile, certFile: serverFiles.certFile, keyFile: serverFiles.keyFile };

  let ca = usableCa(dir, now);
  if (ca !== undefined && existsSync(serverFiles.certFile) && existsSync(serverFiles.keyFile)) {
    const server = readPemPair(dir, 'controller');
    if (certificateFits(server, { caPem: ca.certPem, ...names, now, minValidMs: MIN_VALID_MS })) return { ...files, outcome: 'reused' };
  }
  const outcome = ca === undefined ? 'created' : 'issued';
  if (ca === undefined) {
    ca = await generateCa({ commonName: 'llmgw local CA', now });
    writePemPair(dir, 'ca', ca, { overwrite: true });
  }
  writePemPair(dir, 'controller', await issueCertificate(ca, { commonName: 'controller', ...names, usage: 'server', now }), { overwrite: true });
  return { ...files, outcome };
}

/** The CA in `dir` when it can be read, signs for itself, holds its key and has a week or more left. */
function usableCa(dir: string, now: Date): PemPair | undefined {
  const { certFile, keyFile } = pemPairFiles(dir, 'ca');
  if (!existsSync(certFile) || !existsSync(keyFile)) return undefined;
  const ca = readPemPair(dir, 'ca');
  return certificateFits(ca, { caPem: ca.certPem, now, minValidMs: MIN_VALID_MS }) ? ca : undefined;
}
