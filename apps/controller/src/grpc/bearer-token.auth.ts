import { timingSafeEqual } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';

/**
 * Whether a call carries `authorization: Bearer <token>` with exactly `token`, compared in
 * constant time. `undefined` means no token is configured (LLMGW_CONTROLLER_INSECURE_NO_AUTH):
 * every call passes.
 */
export function tokenMatches(metadata: Metadata, token: string | undefined): boolean {
  if (token === undefined) return true;
  const header = metadata.get('authorization')[0];
  const m = typeof header === 'string' ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  if (!m) return false;
  const given = Buffer.from(m[1]);
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}
