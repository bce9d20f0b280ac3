import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { IncomingMessage } from 'node:http';
import { AdminAccess, bearerSecret, READ_ONLY_ROUTE, scopeOfMethod, type AdminNeed } from '@llmgw/observability';
import type { Store } from '@llmgw/store';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';
import { CATALOG_STORE } from '../store/catalog-store.provider';

/** Route metadata: the route manages admin tokens, which only the bootstrap token may. */
export const TOKENS_ROUTE = 'llmgw:admin-tokens-route';

/**
 * Lets a request through only with `Authorization: Bearer <token>`: the bootstrap token
 * (LLMGW_CATALOG_ADMIN_TOKEN, every scope) or a stored admin token whose scopes cover the route
 * (`read` for GET and dry runs, `write` for changes). Without any token configured every request
 * is refused: an unset secret never means "open". No match is a 401, a missing scope a 403.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly access: AdminAccess;

  constructor(
    @Inject(CATALOG_CONFIG) config: CatalogConfig,
    @Inject(CATALOG_STORE) store: Pick<Store, 'adminTokens'>,
    private readonly reflector: Reflector,
  ) {
    this.access = new AdminAccess(config.adminToken, store.adminTokens);
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<IncomingMessage>();
    const handler = context.getHandler();
    const need: AdminNeed = this.reflector.get<boolean>(TOKENS_ROUTE, handler) ? 'tokens' : this.reflector.get<boolean>(READ_ONLY_ROUTE, handler) ? 'read' : scopeOfMethod(req.method);
    const header = req.headers.authorization;
    const refusal = !this.access.hasBootstrap
      ? 'the catalog API is locked: LLMGW_CATALOG_ADMIN_TOKEN is not set on the server, and no stored admin token matches'
      : bearerSecret(header) === undefined
        ? 'send Authorization: Bearer <admin token>'
        : 'the admin token is wrong';
    await this.access.require(header, need, refusal);
    return true;
  }
}
