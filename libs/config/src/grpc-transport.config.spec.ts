import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from './config.error';
import { loadConfig } from './config.loader';
import { GRPC_TRANSPORT_ENV, grpcTransportConfig, grpcTransportProblems, type GrpcRole } from './grpc-transport.config';

const HINT = 'set LLMGW_GRPC_INSECURE=true to run without TLS on purpose';
const dir = mkdtempSync(join(tmpdir(), 'llmgw-grpc-config-'));
const [ca, cert, key] = ['ca.crt', 'tls.crt', 'tls.key'].map((name) => join(dir, name));
beforeAll(() => {
  for (const file of [ca, cert, key]) writeFileSync(file, 'pem');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An app's schema as the controller (server) or the agent/router (client) builds it. */
const schemaFor = (role: GrpcRole) =>
  z
    .object(GRPC_TRANSPORT_ENV)
    .superRefine((e, ctx) => {
      for (const [variable, message] of grpcTransportProblems(e, role)) ctx.addIssue({ code: 'custom', path: [variable], message });
    })
    .transform((e) => grpcTransportConfig(e, role));

function problems(role: GrpcRole, env: Record<string, string>): string[] {
  try {
    loadConfig(schemaFor(role), env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems.map((p) => `${p.variable}: ${p.reason}`);
    throw error;
  }
  return [];
}

describe('gRPC transport settings', () => {
  it('maps a TLS server with client auth, and a client with a client certificate and a server name', () => {
    expect(loadConfig(schemaFor('server'), { LLMGW_GRPC_TLS_CERT: cert, LLMGW_GRPC_TLS_KEY: key, LLMGW_GRPC_TLS_CA: ca, LLMGW_GRPC_TLS_CLIENT_AUTH: 'true', LLMGW_GRPC_TLS_SERVER_NAME: 'ignored' })).toEqual({
      insecure: false,
      caFile: ca,
      certFile: cert,
      keyFile: key,
      clientAuth: true,
      refreshMs: 60_000,
    });
    expect(
      loadConfig(schemaFor('client'), { LLMGW_GRPC_TLS_CA: ca, LLMGW_GRPC_TLS_CERT: cert, LLMGW_GRPC_TLS_KEY: key, LLMGW_GRPC_TLS_SERVER_NAME: 'controller', LLMGW_GRPC_TLS_REFRESH: '5s', LLMGW_GRPC_TLS_CLIENT_AUTH: 'true' }),
    ).toEqual({ insecure: false, caFile: ca, certFile: cert, keyFile: key, clientAuth: false, serverName: 'controller', refreshMs: 5_000 });
  });

  it.each<GrpcRole>(['server', 'client'])('insecure on purpose needs no files (%s)', (role) => {
    expect(loadConfig(schemaFor(role), { LLMGW_GRPC_INSECURE: 'true' })).toEqual({ insecure: true, clientAuth: false, refreshMs: 60_000 });
  });

  it.each<[string, GrpcRole, () => Record<string, string>, string[]]>([
    ['a server without certificate', 'server', () => ({}), [`LLMGW_GRPC_TLS_CERT: is required: the gRPC server presents this certificate (with LLMGW_GRPC_TLS_KEY); ${HINT}`]],
    ['a client without CA', 'client', () => ({}), [`LLMGW_GRPC_TLS_CA: is required: the controller's certificate is verified against this CA; ${HINT}`]],
    [
      'client auth without CA',
      'server',
      () => ({ LLMGW_GRPC_TLS_CERT: cert, LLMGW_GRPC_TLS_KEY: key, LLMGW_GRPC_TLS_CLIENT_AUTH: 'true' }),
      [`LLMGW_GRPC_TLS_CA: is required with LLMGW_GRPC_TLS_CLIENT_AUTH=true: client certificates are verified against it; ${HINT}`],
    ],
    ['a certificate without its key', 'server', () => ({ LLMGW_GRPC_TLS_CERT: cert }), ['LLMGW_GRPC_TLS_KEY: is required with LLMGW_GRPC_TLS_CERT (the private key of that certificate)']],
    ['a key without its certificate', 'client', () => ({ LLMGW_GRPC_TLS_CA: ca, LLMGW_GRPC_TLS_KEY: key }), ['LLMGW_GRPC_TLS_CERT: is required with LLMGW_GRPC_TLS_KEY (the certificate of that key)']],
    [
      'files that do not exist or are directories',
      'client',
      () => ({ LLMGW_GRPC_TLS_CA: join(dir, 'nope.crt'), LLMGW_GRPC_TLS_CERT: dir, LLMGW_GRPC_TLS_KEY: key }),
      [`LLMGW_GRPC_TLS_CA: ${join(dir, 'nope.crt')} does not exist`, `LLMGW_GRPC_TLS_CERT: ${dir} is not a regular file`],
    ],
    ['a refresh of 0', 'client', () => ({ LLMGW_GRPC_TLS_CA: ca, LLMGW_GRPC_TLS_REFRESH: '0' }), ['LLMGW_GRPC_TLS_REFRESH: must be longer than 0']],
  ])('refuses %s', (_, role, env, expected) => {
    expect(problems(role, env())).toEqual(expected);
  });
});
