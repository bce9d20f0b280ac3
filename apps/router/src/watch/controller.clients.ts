import type { GrpcTransportConfig } from '@llmgw/config';
import { RouterServiceClient } from '@llmgw/proto';
import { grpcChannelCredentials } from '@llmgw/tls';
import { WATCH_MAX_MESSAGE_BYTES } from './controller.watch';

/** Makes the RouterService client for one controller address. */
export type ControllerClientFactory = (address: string) => RouterServiceClient;

/** Injection token of the router's {@link ControllerClientFactory}. */
export const CONTROLLER_CLIENTS = Symbol('llmgw.router.controller-clients');

/**
 * ts-proto's grpc-js clients of RouterService, one per controller address, each on its own
 * channel credentials (TLS against the configured CA, a client certificate for mTLS, or plaintext
 * on purpose; one set per client: grpc-js certificate-provider credentials shared by several
 * channels failed later TLS handshakes once one of those channels closed). Not Nest's ClientGrpc: the watch follows NotLeader across several addresses and
 * reads Watch's compressed snapshots as they come, which ClientGrpc's one-URL observables do not
 * fit.
 */
export function controllerClientFactory(grpc: GrpcTransportConfig): ControllerClientFactory {
  // A plain snapshot and an inflated compressed one are held to the same limit.
  return (address) => new RouterServiceClient(address, grpcChannelCredentials(grpc), { 'grpc.max_receive_message_length': WATCH_MAX_MESSAGE_BYTES });
}
