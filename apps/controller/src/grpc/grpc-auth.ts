import { createHash, timingSafeEqual } from 'node:crypto';
import { Metadata, ServerInterceptingCall, type ServerInterceptor } from '@grpc/grpc-js';
import { DomainError, ErrorCode } from '@llmgw/domain';
import { bearerSecret } from '@llmgw/observability';
import type { Logger } from 'pino';
import { grpcStatusOf } from './grpc-errors';

/** Who may call a service: agents (the join token) or routers (the router token). */
export type GrpcCaller = 'agent' | 'router';

/**
 * Every service the controller serves, and whose token its calls must carry. A path whose
 * service is not here is refused, so a service added to the port without a line here cannot be
 * called (grpc-auth.e2e enumerates the service definitions against this table).
 */
export const CALLER_OF_SERVICE: Readonly<Record<string, GrpcCaller>> = {
  'llmgw.v1.AgentService': 'agent',
  'llmgw.v1.RouterService': 'router',
};

/** The tokens each kind of caller must present; undefined = not checked (LLMGW_CONTROLLER_INSECURE_NO_AUTH). */
export interface GrpcTokens {
  readonly agent: string | undefined;
  readonly router: string | undefined;
}

const TOKEN_NAME: Record<GrpcCaller, string> = { agent: 'join token', router: 'router token' };

const digest = (secret: string): Buffer => createHash('sha256').update(secret).digest();

/**
 * The one credential check of the gRPC port, as a pure decision: the method path and the
 * `authorization` header in, the caller or the refusal out. Unknown services and missing or
 * wrong tokens are Unauthenticated; the other kind's token (a router calling AgentService, an
 * agent calling RouterService) is PermissionDenied. Tokens are compared as SHA-256 digests in
 * constant time, so neither their content nor their length leaks through timing.
 */
export class GrpcCallAuthenticator {
  private readonly digests: Partial<Record<GrpcCaller, Buffer>>;

  constructor(private readonly tokens: GrpcTokens) {
    this.digests = {
      ...(tokens.agent !== undefined && { agent: digest(tokens.agent) }),
      ...(tokens.router !== undefined && { router: digest(tokens.router) }),
    };
  }

  /** The caller a call to `path` is allowed as, or throws the DomainError that refuses it. */
  check(path: string, authorization: string | string[] | undefined): GrpcCaller {
    const service = /^\/([^/]+)\/[^/]+$/.exec(path)?.[1];
    const caller = service === undefined ? undefined : CALLER_OF_SERVICE[service];
    if (caller === undefined) throw new DomainError(ErrorCode.Unauthenticated, `unknown method ${path}`);
    if (this.tokens[caller] === undefined) return caller;
    const secret = bearerSecret(authorization);
    const given = secret === undefined ? undefined : digest(secret);
    const matches = (kind: GrpcCaller): boolean => {
      const wanted = this.digests[kind];
      return given !== undefined && wanted !== undefined && timingSafeEqual(given, wanted);
    };
    if (matches(caller)) return caller;
    const other: GrpcCaller = caller === 'agent' ? 'router' : 'agent';
    if (matches(other)) throw new DomainError(ErrorCode.PermissionDenied, `a ${TOKEN_NAME[other]} may not call ${service}; it takes the ${TOKEN_NAME[caller]}`);
    throw new DomainError(ErrorCode.Unauthenticated, `missing or wrong ${TOKEN_NAME[caller]} (authorization: Bearer <token>)`);
  }
}

/**
 * Runs {@link GrpcCallAuthenticator} on every call from its head, before any request message is
 * read: a refused call is answered at once and its message is never decoded, so a client without
 * the token cannot make the controller parse a large protobuf (nor reach a handler at all). This is
 * where the check lives rather than in a Nest guard: a guard runs after grpc-js has decoded the
 * request, and it would not cover a method that has no handler.
 */
export function callAuthInterceptor(auth: GrpcCallAuthenticator, logger: Logger): ServerInterceptor {
  const log = logger.child({ context: 'GrpcAuth' });
  return (method, call) =>
    new ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, proceed) {
            try {
              // One authorization value, as text; several (or a binary one) are refused like none.
              const values = metadata.get('authorization');
              auth.check(method.path, values.length === 1 && typeof values[0] === 'string' ? values[0] : undefined);
              proceed(metadata);
            } catch (error) {
              const refusal = grpcStatusOf(error);
              log.warn({ peer: call.getPeer(), method: method.path, code: refusal.code }, 'gRPC call refused: missing or wrong token');
              call.sendStatus({ ...refusal, metadata: new Metadata() });
            }
          },
        });
      },
    });
}

/** A server call's TLS view (grpc-js `getAuthContext`). */
export interface AuthContextCall {
  getAuthContext(): { sslPeerCertificate?: { subject?: { CN?: string | string[] } } } | null;
}

/**
 * With mutual TLS the client certificate names the caller: a call whose verified certificate
 * names another id than the node id (or router id) the call claims is refused PermissionDenied,
 * so a node's certificate cannot be used to pose as another node. Without a client certificate
 * (TLS without client auth, or plaintext) the tokens and the node secret are the whole check.
 */
export function assertClaimMatchesCertificate(call: AuthContextCall, claimed: string, what: 'node id' | 'router id'): void {
  const cn = call.getAuthContext()?.sslPeerCertificate?.subject?.CN;
  if (cn === undefined) return;
  const names = Array.isArray(cn) ? cn : [cn];
  if (!names.includes(claimed)) throw new DomainError(ErrorCode.PermissionDenied, `the client certificate is for ${names.join(', ')}, not ${what} ${claimed}`);
}
