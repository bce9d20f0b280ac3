import { timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { DomainError, ErrorCode } from '@llmgw/domain';
import type { IncomingMessage } from 'node:http';
import { CONTROLLER_CONFIG, type ControllerConfig } from '../config/controller.config';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * Admin API access. With a token configured every request needs `Authorization: Bearer
 * <token>`, loopback included. Without one the admin API answers only clients on this machine
 * (loopback peers): an operator on the box can use `llmgw` with no setup, nobody else can.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  private readonly token: string | undefined;

  constructor(@Inject(CONTROLLER_CONFIG) config: Pick<ControllerConfig, 'adminToken'>) {
    this.token = config.adminToken;
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<IncomingMessage>();
    if (this.token === undefined) {
      if (LOOPBACK.has(req.socket.remoteAddress ?? '')) return true;
      throw new DomainError(ErrorCode.PermissionDenied, 'the admin API has no token configured (LLMGW_CONTROLLER_ADMIN_TOKEN) and answers clients on this machine only');
    }
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
    const given = Buffer.from(m?.[1] ?? '');
    const wanted = Buffer.from(this.token);
    if (!m || given.length !== wanted.length || !timingSafeEqual(given, wanted)) {
      throw new DomainError(ErrorCode.Unauthenticated, 'missing or wrong admin token (Authorization: Bearer <token>)');
    }
    return true;
  }
}
