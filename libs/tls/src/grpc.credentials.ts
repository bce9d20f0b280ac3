import { checkServerIdentity } from 'node:tls';
import { ChannelCredentials, credentials, experimental, ServerCredentials } from '@grpc/grpc-js';
import type { GrpcTransportConfig } from '@llmgw/config';

/**
 * grpc-js's FileWatcherCertificateProvider with its refresh timer unref'd. grpc-js starts the
 * timer when the first server or channel subscribes and clears it when the last one leaves
 * (server shutdown, channel close); unref'd, it never keeps a process alive on its own either,
 * so apps and tests need no dispose call. Files are read at once and every `refreshIntervalMs`.
 */
export class CertificateFileWatcher extends experimental.FileWatcherCertificateProvider {
  override addCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    super.addCaCertificateListener(listener);
    this.unrefTimer();
  }

  override addIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    super.addIdentityCertificateListener(listener);
    this.unrefTimer();
  }

  /** Whether the refresh timer runs (someone listens); for tests of the lifetime. */
  get watching(): boolean {
    return this.timer() !== null;
  }

  private unrefTimer(): void {
    this.timer()?.unref();
  }

  private timer(): NodeJS.Timeout | null {
    // grpc-js keeps it in a field its typings mark private.
    return (this as unknown as { refreshTimer: NodeJS.Timeout | null }).refreshTimer;
  }
}

/**
 * Server credentials for `t`: plaintext when `t.insecure`; otherwise TLS with `certFile`/`keyFile`,
 * and with `clientAuth` every client must present a certificate signed by `caFile`. The files are
 * re-read every `t.refreshMs` while the server runs: replacing them on disk rotates the
 * certificate (and the trusted CA) for new connections without a restart. Until the first read
 * completes, and while the files do not form a valid pair, connections are dropped. Throws when
 * TLS lacks its files (validate with grpcTransportProblems first).
 */
export function grpcServerCredentials(t: GrpcTransportConfig): ServerCredentials {
  if (t.insecure) return ServerCredentials.createInsecure();
  if (t.certFile === undefined || t.keyFile === undefined) throw new Error('grpcServerCredentials: TLS needs certFile and keyFile');
  if (t.clientAuth && t.caFile === undefined) throw new Error('grpcServerCredentials: clientAuth needs caFile');
  const files = new CertificateFileWatcher({
    certificateFile: t.certFile,
    privateKeyFile: t.keyFile,
    ...(t.clientAuth && { caCertificateFile: t.caFile }),
    refreshIntervalMs: t.refreshMs,
  });
  // One provider serves both roles. (grpc-js 1.14 passes this function's first argument on as the
  // identity provider and the second as the CA provider, whatever its typings call them; one
  // object for both makes the order moot.) Without clientAuth there is no CA provider, so client
  // certificates are not even requested.
  return experimental.createCertificateProviderServerCredentials(files, t.clientAuth ? files : null, t.clientAuth);
}

/**
 * Channel credentials for `t`: plaintext when `t.insecure`; otherwise TLS that verifies the server
 * certificate against `caFile` and the dialed host name (or `serverName` when set, for dialing an
 * address the certificate does not name), presenting `certFile`/`keyFile` as a client certificate
 * when both are set (mTLS). Files are re-read every `t.refreshMs` while a channel uses them.
 * Throws when TLS lacks its CA.
 */
export function grpcChannelCredentials(t: GrpcTransportConfig): ChannelCredentials {
  if (t.insecure) return credentials.createInsecure();
  if (t.caFile === undefined) throw new Error('grpcChannelCredentials: TLS needs caFile');
  const identity = t.certFile !== undefined && t.keyFile !== undefined;
  const files = new CertificateFileWatcher({
    caCertificateFile: t.caFile,
    ...(identity && { certificateFile: t.certFile, privateKeyFile: t.keyFile }),
    refreshIntervalMs: t.refreshMs,
  });
  const serverName = t.serverName;
  return experimental.createCertificateProviderChannelCredentials(
    files,
    identity ? files : null,
    serverName === undefined ? undefined : { checkServerIdentity: (_host, cert) => checkServerIdentity(serverName, cert) },
  );
}
