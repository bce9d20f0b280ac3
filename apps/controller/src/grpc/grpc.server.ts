import { Metadata, Server, ServerCredentials, ServerInterceptingCall, status, type ServerInterceptor, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { AgentServiceService, type AgentServiceServer, type RouterServiceServer } from '@llmgw/proto';
import type { Logger } from 'pino';
import { tokenMatches } from './bearer-token.auth';
import { ROUTER_SERVICE_DEFINITION } from './router.service';

/** The tokens each service's calls must carry; undefined = not checked (insecure mode). */
export interface GrpcTokens {
  readonly join: string | undefined;
  readonly router: string | undefined;
}

const AGENT_PREFIX = '/llmgw.v1.AgentService/';
const ROUTER_PREFIX = '/llmgw.v1.RouterService/';

/**
 * Checks `authorization: Bearer <token>` from the call's head, before any request message is
 * read: a call without the right token is answered UNAUTHENTICATED at once and its message is
 * never decoded, so a client with no token cannot make the controller parse 64 MB of protobuf.
 * AgentService takes the join token, RouterService the router token; any other method is
 * refused. The services check the same tokens again (defence in depth).
 */
export function tokenInterceptor(tokens: GrpcTokens, logger: Logger): ServerInterceptor {
  const log = logger.child({ context: 'GrpcAuth' });
  return (method, call) => {
    const path = method.path;
    const service = path.startsWith(AGENT_PREFIX) ? 'join' : path.startsWith(ROUTER_PREFIX) ? 'router' : undefined;
    return new ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, proceed) {
            if (service !== undefined && tokenMatches(metadata, tokens[service])) {
              proceed(metadata);
              return;
            }
            log.warn({ peer: call.getPeer(), method: path }, 'gRPC call refused: missing or wrong token');
            call.sendStatus({
              code: status.UNAUTHENTICATED,
              details: service === undefined ? `unknown method ${path}` : `missing or wrong ${service} token (authorization: Bearer <token>)`,
              metadata: new Metadata(),
            });
          },
        });
      },
    });
  };
}

/** The controller's gRPC listener: AgentService and RouterService on one port. */
export class ControllerGrpcServer {
  private readonly server: Server;
  private boundPort: number | undefined;

  constructor(agents: AgentServiceServer, routers: RouterServiceServer, tokens: GrpcTokens, logger: Logger) {
    this.server = new Server({
      // Agents and routers hold long streams; a dead peer is found by keepalive pings.
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.http2.min_ping_interval_without_data_ms': 10_000,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
      interceptors: [tokenInterceptor(tokens, logger)],
    });
    this.server.addService(AgentServiceService, agents);
    this.server.addService(ROUTER_SERVICE_DEFINITION, routers as unknown as UntypedServiceImplementation);
  }

  /** Binds `host:port` (port 0 = any free port) and returns the bound port. */
  listen(host: string, port: number): Promise<number> {
    const target = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    return new Promise((resolve, reject) => {
      this.server.bindAsync(target, ServerCredentials.createInsecure(), (error, bound) => {
        if (error) reject(new Error(`gRPC cannot listen on ${target}: ${error.message}`));
        else resolve((this.boundPort = bound));
      });
    });
  }

  get port(): number | undefined {
    return this.boundPort;
  }

  /** Stops taking calls and ends open streams: graceful for `graceMs`, then forced. */
  close(graceMs = 2_000): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      timer.unref();
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Ends every call at once. */
  forceClose(): void {
    this.server.forceShutdown();
  }
}
