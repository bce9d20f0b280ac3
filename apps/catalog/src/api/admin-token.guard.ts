import { createHash, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { CATALOG_CONFIG, type CatalogConfig } from '../config/catalog.config';
import { HttpProblemError } from './http-problem.error';

const CHALLENGE = { 'www-authenticate': 'Bearer realm="llmgw-catalog"' };

/**
 * Lets a request through only with `Authorization: Bearer <LLMGW_CATALOG_ADMIN_TOKEN>`, compared
 * in constant time. Without a configured token every request is refused: an unset secret never
 * means "open". Refusals are 401 problems with a `WWW-Authenticate` challenge.
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
      throw new HttpProblemError('unauthorized', 'the catalog API is locked: LLMGW_CATALOG_ADMIN_TOKEN is not set on the server', [], { headers: CHALLENGE });
    }
    const header = req.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer +(\S+) *$/i.exec(header) : null;
    if (!match) throw new HttpProblemError('unauthorized', 'send Authorization: Bearer <admin token>', [], { headers: CHALLENGE });
    if (!timingSafeEqual(digest(match[1]), this.expected)) {
      throw new HttpProblemError('unauthorized', 'the admin token is wrong', [], { headers: CHALLENGE });
    }
    return true;
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
