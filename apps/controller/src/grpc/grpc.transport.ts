import { createServer } from 'node:net';
import type { ServerCredentials, ServerInterceptor } from '@grpc/grpc-js';
import { ServerGrpc } from '@nestjs/microservices';
import { AgentServiceService } from '@llmgw/proto';
import { ROUTER_SERVICE_DEFINITION } from './router.calls';

/** The proto package both services live in. */
export const GRPC_PACKAGE = 'llmgw.v1';

/**
 * What Nest's gRPC transport serves: ts-proto's grpc-js service definitions (their codecs, and
 * RouterService's pass-through Watch serializer) handed over as the package definition, so no
 * .proto file is loaded at run time and the wire code is the generated one.
 */
export const GRPC_PACKAGE_DEFINITION = {
  [`${GRPC_PACKAGE}.AgentService`]: AgentServiceService,
  [`${GRPC_PACKAGE}.RouterService`]: ROUTER_SERVICE_DEFINITION,
} as const;

/** The largest request message the controller reads (a refused one ends RESOURCE_EXHAUSTED). Snapshots it sends may be larger. */
export const GRPC_MAX_RECEIVE_BYTES = 16 * 1024 * 1024;
const GRPC_MAX_SEND_BYTES = 64 * 1024 * 1024;

export interface ControllerGrpcTransportOptions {
  readonly host: string;
  /** The port to bind: a real one (resolve 0 first with {@link freeTcpPort}). */
  readonly port: number;
  readonly credentials: ServerCredentials;
  /** Run on every call before its first message is read (the credential check). */
  readonly interceptors: readonly ServerInterceptor[];
  /** How long open streams get to end on close before they are cut. */
  readonly closeGraceMs: number;
}

/** A TCP port free on `host` now (what port 0 means for the gRPC listener; Nest's transport does not say which port it bound). */
export function freeTcpPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error(`no free port on ${host}`))));
    });
  });
}

/**
 * Nest's gRPC transport for the controller: `@nestjs/microservices`' ServerGrpc, which creates
 * and binds the grpc-js server and adds the services, given the credentials, the keepalive and
 * message limits, and the call interceptors grpc-js runs before a message is decoded. One thing
 * is its own: closing is graceful within a deadline, then forced (routers' Watch streams never
 * end on their own, so a plain graceful shutdown would wait forever, and a forced one would cut
 * agents before their last results arrive).
 */
export class ControllerGrpcTransport extends ServerGrpc {
  constructor(private readonly settings: ControllerGrpcTransportOptions) {
    super({
      package: GRPC_PACKAGE,
      packageDefinition: GRPC_PACKAGE_DEFINITION,
      url: settings.host.includes(':') ? `[${settings.host}]:${settings.port}` : `${settings.host}:${settings.port}`,
      credentials: settings.credentials,
      maxReceiveMessageLength: GRPC_MAX_RECEIVE_BYTES,
      maxSendMessageLength: GRPC_MAX_SEND_BYTES,
      // Agents and routers hold long streams; a dead peer is found by keepalive pings.
      keepalive: { keepaliveTimeMs: 30_000, keepaliveTimeoutMs: 10_000, keepalivePermitWithoutCalls: 1, http2MinPingIntervalWithoutDataMs: 10_000 },
      // grpc-js server options pass through Nest's channel options (its typings know channel options only).
      channelOptions: { interceptors: [...settings.interceptors] } as Record<string, unknown>,
    });
  }

  /** The bound port, once listening. */
  get port(): number {
    return this.settings.port;
  }

  /** Stops taking calls and ends open streams: graceful for the configured grace, then forced. */
  override async close(): Promise<void> {
    const server = this.grpcClient as { tryShutdown(cb: () => void): void; forceShutdown(): void } | null;
    this.grpcClient = null;
    if (server === null || server === undefined) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, this.settings.closeGraceMs);
      timer.unref();
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
