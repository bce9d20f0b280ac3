import { Metadata } from '@grpc/grpc-js';

/** Call metadata for RouterService: `authorization: Bearer <token>` when a router token is configured. */
export function controllerMetadata(token: string | undefined): Metadata {
  const metadata = new Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  return metadata;
}
