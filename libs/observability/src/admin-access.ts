import { hash, timingSafeEqual } from 'node:crypto';
import { SetMetadata } from '@nestjs/common';
import { DomainError, ErrorCode, type AdminScope } from '@llmgw/domain';

/** A stored admin token as the access check needs it. */
export interface AdminTokenLookup {
  liveByHash(secretHash: string): Promise<{ readonly name: string; readonly scopes: readonly AdminScope[] } | undefined>;
}

/** Who made a request: the bootstrap token (every scope, and managing admin tokens) or a stored token. */
export interface AdminPrincipal {
  readonly name: string;
  readonly scopes: readonly AdminScope[];
  /** Only the bootstrap token may create and revoke admin tokens. */
  readonly bootstrap: boolean;
}

/** What a route needs: a scope, or `tokens` (managing admin tokens: the bootstrap token only). */
export type AdminNeed = AdminScope | 'tokens';

const BEARER_RE = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** SHA-256 (hex) of a secret: what the store holds for admin tokens and API keys (one-shot: a router hashes every request's key). */
export function secretHash(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/** The secret of an `Authorization: Bearer <secret>` value; undefined when it is missing or malformed. */
export function bearerSecret(authorization: string | string[] | undefined): string | undefined {
  if (typeof authorization !== 'string') return undefined;
  return BEARER_RE.exec(authorization)?.[1];
}

/** The scope a route needs by its method: reads need `read`, everything else `write`. */
export function scopeOfMethod(method: string | undefined): AdminScope {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/** Route metadata: a POST that changes nothing (a dry run) needs only `read`. */
export const READ_ONLY_ROUTE = 'llmgw:read-only-route';
export const ReadOnlyRoute = (): MethodDecorator => SetMetadata(READ_ONLY_ROUTE, true);

/**
 * The admin credential check of the REST APIs (catalog and controller admin): the bootstrap
 * token from the environment (compared in constant time, by digest) or a stored token with
 * scopes, looked up by its SHA-256. Never logs or returns a secret.
 */
export class AdminAccess {
  private readonly bootstrapDigest: Buffer | undefined;

  constructor(
    bootstrapToken: string | undefined,
    private readonly lookup: AdminTokenLookup | undefined,
  ) {
    this.bootstrapDigest = bootstrapToken === undefined ? undefined : Buffer.from(secretHash(bootstrapToken), 'hex');
  }

  /** Whether a bootstrap token is configured. */
  get hasBootstrap(): boolean {
    return this.bootstrapDigest !== undefined;
  }

  /** Who presents this Authorization value; undefined when nothing matches. */
  async principal(authorization: string | string[] | undefined): Promise<AdminPrincipal | undefined> {
    const secret = bearerSecret(authorization);
    if (secret === undefined) return undefined;
    const hash = secretHash(secret);
    if (this.bootstrapDigest !== undefined && timingSafeEqual(Buffer.from(hash, 'hex'), this.bootstrapDigest)) {
      return { name: 'bootstrap', scopes: ['read', 'write'], bootstrap: true };
    }
    const stored = await this.lookup?.liveByHash(hash);
    return stored === undefined ? undefined : { name: stored.name, scopes: [...stored.scopes], bootstrap: false };
  }

  /** The principal, if it may do `need`; else Unauthenticated (no match) or PermissionDenied (scope missing). */
  async require(authorization: string | string[] | undefined, need: AdminNeed, unauthenticated: string): Promise<AdminPrincipal> {
    const who = await this.principal(authorization);
    if (who === undefined) throw new DomainError(ErrorCode.Unauthenticated, unauthenticated);
    if (need === 'tokens' ? !who.bootstrap : !who.scopes.includes(need)) {
      const what = need === 'tokens' ? 'manage admin tokens (only the bootstrap token may)' : `do this (it needs the '${need}' scope)`;
      throw new DomainError(ErrorCode.PermissionDenied, `admin token '${who.name}' may not ${what}`);
    }
    return who;
  }
}
