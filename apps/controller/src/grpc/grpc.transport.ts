import { Server, ServerCredentials, type ServerInterceptor } from '@grpc/grpc-js';
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
  /** 0 = any free port; {@link ControllerGrpcTransport.port} says which after listening. */
  readonly port: number;
  readonly credentials: ServerCredentials;
  /** Run on every call before its first message is read (the credential check). */
  readonly interceptors: readonly ServerInterceptor[];
  /** How long open streams get to end on close before they are cut. */
  readonly closeGraceMs: number;
}

/**
 * Nest's gRPC transport for the controller (a custom strategy on `@nestjs/microservices`'
 * ServerGrpc): the same server, handlers, guards and filters, plus three things the stock one
 * lacks: it keeps the port it bound (port 0 in tests, and the "listening" log line), it runs the
 * call interceptors grpc-js offers before a message is decoded, and it closes gracefully within
 * a deadline (routers' Watch streams never end on their own, so a plain graceful shutdown would
 * wait forever, and a forced one would cut agents before their last results arrive).
 */
export class ControllerGrpcTransport extends ServerGrpc {
  private boundPort: number | undefined;
  private server: Server | undefined;

  constructor(private readonly settings: ControllerGrpcTransportOptions) {
    super({
      package: GRPC_PACKAGE,
      packageDefinition: GRPC_PACKAGE_DEFINITION,
      url: settings.host.includes(':') ? `[${settings.host}]:${settings.port}` : `${settings.host}:${settings.port}`,
    });
  }

  /** The bound port, once listening. */
  get port(): number | undefined {
    return this.boundPort;
  }

  /** Creates and binds the grpc-js server (Nest then adds the services to it). */
  override async createClient(): Promise<Server> {
    const server = new Server({
      // Agents and routers hold long streams; a dead peer is found by keepalive pings.
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.http2.min_ping_interval_without_data_ms': 10_000,
      'grpc.max_receive_message_length': GRPC_MAX_RECEIVE_BYTES,
      'grpc.max_send_message_length': GRPC_MAX_SEND_BYTES,
      interceptors: [...this.settings.interceptors],
    });
    this.boundPort = await new Promise<number>((resolve, reject) => {
      server.bindAsync(this.url, this.settings.credentials, (error, bound) => {
        if (error) reject(new Error(`gRPC cannot listen on ${this.url}: ${error.message}`));
        else resolve(bound);
      });
    });
    this.server = server;
    return server;
  }

  /** Stops taking calls and ends open streams: graceful for the configured grace, then forced. */
  override async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.grpcClient = null;
    if (server === undefined) return;
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
