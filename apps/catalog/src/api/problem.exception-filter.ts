import { randomUUID } from 'node:crypto';
import { Catch, HttpException, Inject, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { CatalogError } from '@llmgw/catalog';
import { DomainError, ErrorCode } from '@llmgw/domain';
import { ROOT_LOGGER, type Logger } from '@llmgw/observability';
import { HttpProblemError, problemBody, type ProblemBody, type ProblemKind } from './http-problem.error';

/** Domain error codes → problem kinds; exhaustive, so a new code cannot go unmapped. */
const CODE_KINDS: Record<ErrorCode, ProblemKind> = {
  [ErrorCode.InvalidArgument]: 'bad-request',
  [ErrorCode.NotFound]: 'not-found',
  [ErrorCode.Conflict]: 'conflict',
  [ErrorCode.PreconditionFailed]: 'precondition-failed',
  [ErrorCode.Unauthenticated]: 'unauthorized',
  [ErrorCode.PermissionDenied]: 'unauthorized',
  [ErrorCode.ResourceExhausted]: 'unavailable',
  [ErrorCode.Unavailable]: 'unavailable',
  [ErrorCode.Unplaceable]: 'bad-request',
  [ErrorCode.Fenced]: 'unavailable',
  [ErrorCode.Internal]: 'internal',
};

/** Nest's own HTTP statuses (unknown route, bad method) → problem kinds. */
const STATUS_KINDS: Record<number, ProblemKind> = { 400: 'bad-request', 401: 'unauthorized', 404: 'not-found', 413: 'body-too-large', 415: 'unsupported-media-type' };

/**
 * The catalog app's one error mapper: every failure becomes an `application/problem+json` body
 * (`type`, `title`, `status`, `detail`, `problems`). A 500 logs the error with an id and shows
 * only the id, never a stack trace or message.
 */
@Catch()
export class ProblemExceptionFilter implements ExceptionFilter {
  private readonly log: Logger;

  constructor(@Inject(ROOT_LOGGER) logger: Logger) {
    this.log = logger.child({ context: 'ProblemExceptionFilter' });
  }

  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<ServerResponse>();
    const { body, headers } = this.toProblem(error);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.statusCode = body.status;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res.setHeader('content-type', 'application/problem+json');
    res.setHeader('cache-control', 'no-store');
    res.end(JSON.stringify(body));
  }

  private toProblem(error: unknown): { body: ProblemBody; headers: Record<string, string> } {
    if (error instanceof HttpProblemError) return { body: error.toBody(), headers: error.extra.headers ?? {} };
    if (error instanceof CatalogError) return { body: problemBody('invalid-catalog', error.message.split('\n')[0], error.problems), headers: {} };
    if (error instanceof DomainError && error.code !== ErrorCode.Internal) {
      const kind = CODE_KINDS[error.code];
      if (kind === 'unavailable') this.log.warn({ code: error.code, err: error.message }, 'store unavailable');
      return { body: problemBody(kind, error.message, error.problems), headers: kind === 'unavailable' ? { 'retry-after': '1' } : {} };
    }
    if (error instanceof HttpException && error.getStatus() < 500) {
      const status = error.getStatus();
      const kind = STATUS_KINDS[status];
      const body = kind ? problemBody(kind, error.message) : { ...problemBody('bad-request', error.message), status, title: 'Request refused' };
      return { body, headers: {} };
    }
    const errorId = randomUUID();
    this.log.error({ errorId, err: error }, 'unhandled error answering a request');
    return { body: { ...problemBody('internal', `internal error; search the server log for errorId ${errorId}`), errorId }, headers: {} };
  }
}
