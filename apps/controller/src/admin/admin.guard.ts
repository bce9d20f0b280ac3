import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { DomainError, ErrorCode } from '@llmgw/domain';
import { AdminAccess, scopeOfMethod, type AdminTokenLookup } from '@llmgw/observability';
import type { IncomingMessage } from 'node:http';
import { CONTROLLER_CONFIG, type ControllerConfig } from '../config/controller.config';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/** Injection token of the stored admin tokens the guard accepts (the store's `adminTokens`). */
export const ADMIN_TOKENS = Symbol('llmgw.controller.admin-tokens');

/**
 * Admin API access. A request with `Authorization: Bearer <token>` needs the bootstrap token
 * (LLMGW_CONTROLLER_ADMIN_TOKEN, every scope) or a stored admin token (created through the
 * catalog API) whose scopes cover the route: `read` for GET, `write` for cordon, drain, gc and
 * forget. No match is a 401, a missing scope a 403. Without a bootstrap token, clients on this
 * machine (loopback peers) are answered whatever they send, as before stored tokens existed:
 * an operator on the box can use `llmgw` with no setup; anyone else needs a stored token.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  private readonly access: AdminAccess;

  constructor(@Inject(CONTROLLER_CONFIG) config: Pick<ControllerConfig, 'adminToken'>, @Inject(ADMIN_TOKENS) tokens: AdminTokenLookup) {
    this.access = new AdminAccess(config.adminToken, tokens);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<IncomingMessage>();
    if (!this.access.hasBootstrap) {
      // Loopback clients get everything without a credential, so whatever one they send changes nothing.
      if (LOOPBACK.has(req.socket.remoteAddress ?? '')) return true;
      if (req.headers.authorization === undefined) {
        throw new DomainError(ErrorCode.PermissionDenied, 'the admin API has no token configured (LLMGW_CONTROLLER_ADMIN_TOKEN) and answers clients on this machine only');
      }
    }
    await this.access.require(req.headers.authorization, scopeOfMethod(req.method), 'missing or wrong admin token (Authorization: Bearer <token>)');
    return true;
  }
}
