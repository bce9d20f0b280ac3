import type { GrpcTransportConfig } from '@llmgw/config';
import { AgentServiceClient } from '@llmgw/proto';
import { grpcChannelCredentials } from '@llmgw/tls';

/** Makes the AgentService client for one controller address. */
export type ControllerClientFactory = (address: string) => AgentServiceClient;

/** Injection token of the agent's {@link ControllerClientFactory}. */
export const CONTROLLER_CLIENTS = Symbol('llmgw.agent.controller-clients');

const KEEPALIVE_TIME_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;

/**
 * ts-proto's grpc-js clients of AgentService, one per controller address, each on its own
 * channel credentials (TLS against the configured CA, a client certificate for mTLS, or plaintext
 * on purpose; one set per client: grpc-js certificate-provider credentials shared by several
 * channels failed later TLS handshakes once one of those channels closed); the certificate files
 * are re-read while clients use them. Not Nest's ClientGrpc:
 * the connection follows NotLeader across several addresses (a client per address, made on
 * demand) and drives one long duplex stream by hand, which ClientGrpc's one-URL observables do
 * not fit.
 */
export function controllerClientFactory(grpc: GrpcTransportConfig): ControllerClientFactory {
  return (address) =>
    new AgentServiceClient(address, grpcChannelCredentials(grpc), {
      // HTTP/2 pings find a controller that vanished without closing the connection (power
      // loss, a partition); without them a dead stream looks like a quiet one.
      'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
      'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
    });
}
