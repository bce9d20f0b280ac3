import { accessSync, constants, statSync } from 'node:fs';
import { env } from './env-var.schema';

/**
 * How a gRPC server or client secures its connections, shared by the controller (server), the
 * agent and the router (clients). Spread into an app's `z.object({...})`, check with
 * {@link grpcTransportProblems} in its `superRefine`, map with {@link grpcTransportConfig}.
 */
export const GRPC_TRANSPORT_ENV = {
  /** Plaintext gRPC, on purpose (logged as a warning); default false: TLS. */
  LLMGW_GRPC_INSECURE: env.boolean({ default: false }),
  /** PEM CA bundle: clients verify the server against it; with client auth the server verifies clients against it. */
  LLMGW_GRPC_TLS_CA: env.path({ optional: true }),
  /** PEM certificate (chain) this process presents: required on the server, a client certificate on a client. */
  LLMGW_GRPC_TLS_CERT: env.path({ optional: true }),
  /** PEM private key of LLMGW_GRPC_TLS_CERT. */
  LLMGW_GRPC_TLS_KEY: env.path({ optional: true }),
  /** Server side: require client certificates signed by LLMGW_GRPC_TLS_CA (mTLS); default false. */
  LLMGW_GRPC_TLS_CLIENT_AUTH: env.boolean({ default: false }),
  /** Client side: the name the server certificate must carry, when it differs from the dialed host. */
  LLMGW_GRPC_TLS_SERVER_NAME: env.string({ optional: true }),
  /** How often the certificate, key and CA files are re-read (rotation without a restart); default 60s. */
  LLMGW_GRPC_TLS_REFRESH: env.duration({ default: '60s' }),
} as const;

/** The parsed {@link GRPC_TRANSPORT_ENV} variables. */
export interface GrpcTransportEnv {
  LLMGW_GRPC_INSECURE: boolean;
  LLMGW_GRPC_TLS_CA?: string | undefined;
  LLMGW_GRPC_TLS_CERT?: string | undefined;
  LLMGW_GRPC_TLS_KEY?: string | undefined;
  LLMGW_GRPC_TLS_CLIENT_AUTH: boolean;
  LLMGW_GRPC_TLS_SERVER_NAME?: string | undefined;
  LLMGW_GRPC_TLS_REFRESH: number;
}

/** Which end of the connection a process is: the controller serves, agents and routers dial. */
export type GrpcRole = 'server' | 'client';

/**
 * TLS settings of one gRPC end, in the names code uses. Paths are absolute. `insecure` means
 * plaintext on purpose; otherwise a server has `certFile`/`keyFile` and a client has `caFile`.
 */
export interface GrpcTransportConfig {
  insecure: boolean;
  /** PEM CA bundle: what a client trusts for the server, what a server with `clientAuth` trusts for clients. */
  caFile?: string;
  /** PEM certificate presented: the server's, or a client's (mTLS). */
  certFile?: string;
  keyFile?: string;
  /** Server: refuse clients without a certificate signed by `caFile`. Always false for a client. */
  clientAuth: boolean;
  /** Client: the name checked in the server certificate instead of the dialed host. */
  serverName?: string;
  /** Milliseconds between re-reads of the files; > 0. */
  refreshMs: number;
}

const INSECURE_HINT = 'set LLMGW_GRPC_INSECURE=true to run without TLS on purpose';

/**
 * What is wrong with `e` for `role`, as `[variable, message]` pairs for an app's `superRefine`;
 * empty when it is fine. Insecure: nothing is required. Otherwise a server needs a certificate
 * and key, a client a CA, client auth a CA; a certificate never goes without its key; every
 * named file must exist and be readable now (files are read again later, on every refresh).
 */
export function grpcTransportProblems(e: GrpcTransportEnv, role: GrpcRole): [variable: string, message: string][] {
  const problems: [string, string][] = [];
  if (e.LLMGW_GRPC_TLS_REFRESH <= 0) problems.push(['LLMGW_GRPC_TLS_REFRESH', 'must be longer than 0']);
  if (e.LLMGW_GRPC_INSECURE) return problems;
  const cert = e.LLMGW_GRPC_TLS_CERT;
  const key = e.LLMGW_GRPC_TLS_KEY;
  if (cert !== undefined && key === undefined) problems.push(['LLMGW_GRPC_TLS_KEY', 'is required with LLMGW_GRPC_TLS_CERT (the private key of that certificate)']);
  if (key !== undefined && cert === undefined) problems.push(['LLMGW_GRPC_TLS_CERT', 'is required with LLMGW_GRPC_TLS_KEY (the certificate of that key)']);
  if (role === 'server' && cert === undefined && key === undefined) {
    problems.push(['LLMGW_GRPC_TLS_CERT', `is required: the gRPC server presents this certificate (with LLMGW_GRPC_TLS_KEY); ${INSECURE_HINT}`]);
  }
  if (role === 'server' && e.LLMGW_GRPC_TLS_CLIENT_AUTH && e.LLMGW_GRPC_TLS_CA === undefined) {
    problems.push(['LLMGW_GRPC_TLS_CA', `is required with LLMGW_GRPC_TLS_CLIENT_AUTH=true: client certificates are verified against it; ${INSECURE_HINT}`]);
  }
  if (role === 'client' && e.LLMGW_GRPC_TLS_CA === undefined) {
    problems.push(['LLMGW_GRPC_TLS_CA', `is required: the controller's certificate is verified against this CA; ${INSECURE_HINT}`]);
  }
  const files: [string, string | undefined][] = [
    ['LLMGW_GRPC_TLS_CA', e.LLMGW_GRPC_TLS_CA],
    ['LLMGW_GRPC_TLS_CERT', cert],
    ['LLMGW_GRPC_TLS_KEY', key],
  ];
  for (const [variable, file] of files) {
    const unreadable = file === undefined ? undefined : unreadableFile(file);
    if (unreadable !== undefined) problems.push([variable, unreadable]);
  }
  return problems;
}

/**
 * Maps the parsed variables to {@link GrpcTransportConfig} for `role`. A client never requires
 * client certificates; a server has no server name. Validate first with {@link grpcTransportProblems}.
 */
export function grpcTransportConfig(e: GrpcTransportEnv, role: GrpcRole): GrpcTransportConfig {
  return {
    insecure: e.LLMGW_GRPC_INSECURE,
    ...(e.LLMGW_GRPC_TLS_CA !== undefined && { caFile: e.LLMGW_GRPC_TLS_CA }),
    ...(e.LLMGW_GRPC_TLS_CERT !== undefined && { certFile: e.LLMGW_GRPC_TLS_CERT }),
    ...(e.LLMGW_GRPC_TLS_KEY !== undefined && { keyFile: e.LLMGW_GRPC_TLS_KEY }),
    clientAuth: role === 'server' && e.LLMGW_GRPC_TLS_CLIENT_AUTH,
    ...(role === 'client' && e.LLMGW_GRPC_TLS_SERVER_NAME !== undefined && { serverName: e.LLMGW_GRPC_TLS_SERVER_NAME }),
    refreshMs: e.LLMGW_GRPC_TLS_REFRESH,
  };
}

/** Why `file` cannot be read now (missing, a directory, no permission), or undefined when it can. */
export function unreadableFile(file: string): string | undefined {
  try {
    if (!statSync(file).isFile()) return `${file} is not a regular file`;
    accessSync(file, constants.R_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return `${file} does not exist`;
    if (code === 'EACCES') return `${file} is not readable by this process`;
    return `${file} cannot be read (${code ?? String(error)})`;
  }
}

/** How one gRPC end is secured, as its log and /readyz detail say it (`warning` only for plaintext on purpose). */
export function grpcSecurity(t: GrpcTransportConfig, role: GrpcRole): { security: 'plaintext' | 'tls' | 'mtls'; warning?: string } {
  if (t.insecure) return { security: 'plaintext', warning: 'plaintext on purpose (LLMGW_GRPC_INSECURE=true)' };
  // Mutual: a server that requires client certificates, a client that presents one.
  return { security: (role === 'server' ? t.clientAuth : t.certFile !== undefined) ? 'mtls' : 'tls' };
}
