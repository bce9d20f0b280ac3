import { randomUUID } from 'node:crypto';
import { Catch, HttpException, Inject, Injectable, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { DomainError, ErrorCode, type Problem } from '@llmgw/domain';
import type { ServerResponse } from 'node:http';
import { ROOT_LOGGER, type Logger } from '@llmgw/observability';

/** An RFC 9457 problem document, as every admin API error is answered. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The domain error code. */
  code: string;
  /** Every validation problem with its path, for invalid input. */
  problems?: Problem[];
  /** Correlates a 500 with the log line holding its cause. */
  errorId?: string;
}

/** The one mapping from domain error codes to HTTP statuses for the admin API. */
export const STATUS_OF: Record<ErrorCode, number> = {
  [ErrorCode.InvalidArgument]: 400,
  [ErrorCode.Unauthenticated]: 401,
  [ErrorCode.PermissionDenied]: 403,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.Fenced]: 409,
  [ErrorCode.PreconditionFailed]: 412,
  [ErrorCode.Unplaceable]: 422,
  [ErrorCode.ResourceExhausted]: 429,
  [ErrorCode.Internal]: 500,
  [ErrorCode.Unavailable]: 503,
};

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/**
 * Answers every error of the controller's HTTP side as `application/problem+json`: domain errors
 * with their code's status and every problem; Nest's HTTP errors (an unknown route or method is
 * its 404) with their status, and the `problems` a thrown HttpException's response carries; the
 * body parser's client errors (malformed JSON 400, body too large 413, unsupported charset 415)
 * with their status; anything else as a 500 that names an error id and logs the cause, never a
 * stack trace. Registered app-wide (APP_FILTER), so errors raised before any route is chosen
 * come here too.
 */
@Catch()
@Injectable()
export class ProblemExceptionFilter implements ExceptionFilter {
  private readonly logger: Logger;

  constructor(@Inject(ROOT_LOGGER) logger: Logger) {
    this.logger = logger.child({ context: 'AdminApi' });
  }

  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<ServerResponse>();
    const doc = this.toProblem(error);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.statusCode = doc.status;
    res.setHeader('Content-Type', 'application/problem+json');
    if (doc.status === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="llmgw-controller-admin"');
    res.end(JSON.stringify(doc));
  }

  private toProblem(error: unknown): ProblemDocument {
    if (error instanceof DomainError) {
      const status = STATUS_OF[error.code] ?? 500;
      return {
        type: `https://llmgw.dev/problems/${error.code}`,
        title: TITLES[status] ?? 'Error',
        status,
        detail: error.message.split('\n')[0],
        code: error.code,
        ...(error.problems.length > 0 ? { problems: [...error.problems] } : {}),
      };
    }
    if (error instanceof HttpException && error.getStatus() < 500) {
      const response = error.getResponse();
      const problems = typeof response === 'object' && response !== null && Array.isArray((response as { problems?: unknown }).problems) ? (response as { problems: Problem[] }).problems : [];
      return httpProblem(error.getStatus(), error.message, problems);
    }
    const parser = clientErrorStatus(error);
    if (parser !== undefined) return httpProblem(parser, (error as Error).message);
    const errorId = randomUUID();
    this.logger.error({ err: error, errorId }, 'admin API: unexpected error');
    return {
      type: `https://llmgw.dev/problems/${ErrorCode.Internal}`,
      title: TITLES[500],
      status: 500,
      detail: `internal error ${errorId}; the controller log has the cause`,
      code: ErrorCode.Internal,
      errorId,
    };
  }
}

function httpProblem(status: number, detail: string, problems: readonly Problem[] = []): ProblemDocument {
  const code = status === 404 ? ErrorCode.NotFound : status === 401 ? ErrorCode.Unauthenticated : status === 403 ? ErrorCode.PermissionDenied : ErrorCode.InvalidArgument;
  return { type: `https://llmgw.dev/problems/${code}`, title: TITLES[status] ?? 'Error', status, detail, code, ...(problems.length > 0 ? { problems: [...problems] } : {}) };
}

/**
 * The 4xx status of a client error raised by Express's body parser (an `http-errors` error:
 * `expose` true, a numeric `status`), e.g. 413 for a body over the limit; undefined for
 * anything else, which stays a 500.
 */
function clientErrorStatus(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const { status, expose } = error as Error & { status?: unknown; expose?: unknown };
  return expose === true && typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 500 ? status : undefined;
}
