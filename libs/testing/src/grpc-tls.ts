// Test support: one small PKI for a whole vitest run, so every gRPC connection a test makes runs
// over TLS the way a deployment does. The global setup (tools/scripts/vitest.global-setup.ts)
// writes a CA and one certificate (server and client use; localhost, 127.0.0.1, ::1) into a
// temporary folder; each test process puts the LLMGW_GRPC_TLS_* variables naming them into its
// environment (tools/scripts/vitest.setup.ts), so the controllers, agents and routers tests start,
// in process or as processes, serve and dial TLS unless a test says LLMGW_GRPC_INSECURE=true.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChannelCredentials, ServerCredentials } from '@grpc/grpc-js';
import { generateCa, grpcChannelCredentials, grpcServerCredentials, issueCertificate, writePemPair } from '@llmgw/tls';
import { simEngineExecutable } from './repo-paths';

/** The files of the test PKI. */
export interface TestPki {
  readonly dir: string;
  readonly caFile: string;
  readonly caKeyFile: string;
  readonly certFile: string;
  readonly keyFile: string;
}

/** Writes a CA and a certificate for 127.0.0.1/localhost into a new temporary folder. */
export async function createTestPki(now = new Date()): Promise<TestPki> {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-test-pki-'));
  const ca = await generateCa({ commonName: 'llmgw test CA', now });
  const leaf = await issueCertificate(ca, { commonName: 'llmgw-test', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1', '::1'], usage: 'both', now });
  const caFiles = writePemPair(dir, 'ca', ca);
  const leafFiles = writePemPair(dir, 'llmgw', leaf);
  return { dir, caFile: caFiles.certFile, caKeyFile: caFiles.keyFile, certFile: leafFiles.certFile, keyFile: leafFiles.keyFile };
}

/** The LLMGW_GRPC_TLS_* variables for `pki`: a server presents the certificate, a client trusts the CA. */
export function grpcTlsEnv(pki: Pick<TestPki, 'caFile' | 'certFile' | 'keyFile'>): Record<string, string> {
  return { LLMGW_GRPC_TLS_CA: pki.caFile, LLMGW_GRPC_TLS_CERT: pki.certFile, LLMGW_GRPC_TLS_KEY: pki.keyFile };
}

/** This test process's TLS variables (set by the vitest setup); empty outside vitest. */
export function testGrpcTlsEnv(): Record<string, string> {
  const { LLMGW_GRPC_TLS_CA, LLMGW_GRPC_TLS_CERT, LLMGW_GRPC_TLS_KEY } = process.env;
  if (LLMGW_GRPC_TLS_CA === undefined || LLMGW_GRPC_TLS_CERT === undefined || LLMGW_GRPC_TLS_KEY === undefined) return {};
  return { LLMGW_GRPC_TLS_CA, LLMGW_GRPC_TLS_CERT, LLMGW_GRPC_TLS_KEY };
}

/**
 * Channel credentials trusting the test CA (plaintext when this process has
 * LLMGW_GRPC_INSECURE=true), for a test or bench client of a controller's gRPC port: a new
 * set per client, as the apps make them (one grpc-js certificate-provider credentials object
 * shared by several channels failed later handshakes once one of the channels closed).
 */
export function testChannelCredentials(): ChannelCredentials {
  if (process.env.LLMGW_GRPC_INSECURE === 'true') return grpcChannelCredentials({ insecure: true, clientAuth: false, refreshMs: 60_000 });
  const env = testGrpcTlsEnv();
  if (env.LLMGW_GRPC_TLS_CA === undefined) throw new Error('no test PKI: run under vitest (tools/scripts/vitest.setup.ts sets LLMGW_GRPC_TLS_*)');
  return grpcChannelCredentials({ insecure: false, caFile: env.LLMGW_GRPC_TLS_CA, clientAuth: false, refreshMs: 60_000 });
}

/** Server credentials presenting the test certificate, for fake controllers in tests. */
export function testServerCredentials(): ServerCredentials {
  const env = testGrpcTlsEnv();
  if (env.LLMGW_GRPC_TLS_CERT === undefined) throw new Error('no test PKI: run under vitest (tools/scripts/vitest.setup.ts sets LLMGW_GRPC_TLS_*)');
  return grpcServerCredentials({ insecure: false, certFile: env.LLMGW_GRPC_TLS_CERT, keyFile: env.LLMGW_GRPC_TLS_KEY, clientAuth: false, refreshMs: 60_000 });
}

/**
 * This process's environment for a process a test starts: without any LLMGW_* setting of the
 * developer's (nor variables starting with `alsoDrop`), but with the test PKI's TLS variables, so
 * the process serves or dials gRPC over TLS like everything else in the tests, and with
 * LLMGW_AGENT_SIM_ENGINE naming this checkout's engine simulator.
 */
export function inheritedTestEnv(alsoDrop: readonly string[] = []): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || key.startsWith('LLMGW_') || alsoDrop.some((p) => key.startsWith(p))) continue;
    env[key] = value;
  }
  // An agent a test starts with LLMGW_AGENT_ENGINE_OVERRIDE=sim runs this checkout's simulator.
  return { ...env, ...testGrpcTlsEnv(), LLMGW_AGENT_SIM_ENGINE: simEngineExecutable() };
}

/**
 * For benchmarks, which run outside vitest: makes a test PKI and puts its LLMGW_GRPC_TLS_*
 * variables into this process's environment, so the processes the bench starts serve and dial
 * TLS as deployed, and {@link testChannelCredentials} trusts it. Returns the PKI (its folder is
 * the caller's to remove).
 */
export async function useTestPki(): Promise<TestPki> {
  const pki = await createTestPki();
  Object.assign(process.env, grpcTlsEnv(pki));
  return pki;
}
