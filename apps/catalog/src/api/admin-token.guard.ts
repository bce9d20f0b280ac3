import { createHash, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';
import { ProblemError } from '@llmgw/observability';

/**
 * Lets a request through only with `Authorization: Bearer <LLMGW_CATALOG_ADMIN_TOKEN>`, compared
 * in constant time. Without a configured token every request is refused: an unset secret never
 * means "open". Refusals are 401 problems, which the problem filter gives a `WWW-Authenticate` challenge.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected: Buffer | undefined;

  constructor(@Inject(CATALOG_CONFIG) config: CatalogConfig) {
    this.expected = config.adminToken === undefined ? undefined : digest(config.adminToken);
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<IncomingMessage>();
    if (this.expected === undefined) {
      throw new ProblemError('unauthorized', 'the catalog API is locked: LLMGW_CATALOG_ADMIN_TOKEN is not set on the server');
    }
    const header = req.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer +(\S+) *$/i.exec(header) : null;
    if (!match) throw new ProblemError('unauthorized', 'send Authorization: Bearer <admin token>');
    if (!timingSafeEqual(digest(match[1]), this.expected)) {
      throw new ProblemError('unauthorized', 'the admin token is wrong');
    }
    return true;
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
