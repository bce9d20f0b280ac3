import { Server, ServerCredentials, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { AgentServiceService, type AgentServiceServer, type RouterServiceServer } from '@llmgw/proto';
import { ROUTER_SERVICE_DEFINITION } from './router.service';

/** The controller's gRPC listener: AgentService and RouterService on one port. */
export class ControllerGrpcServer {
  private readonly server = new Server({
    // Agents and routers hold long streams; a dead peer is found by keepalive pings.
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 10_000,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.max_send_message_length': 64 * 1024 * 1024,
  });
  private boundPort: number | undefined;

  constructor(agents: AgentServiceServer, routers: RouterServiceServer) {
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
