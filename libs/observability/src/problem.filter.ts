import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { Catch, HttpException, type ArgumentsHost, type ExceptionFilter, type Provider } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { DomainError, ErrorCode, HTTP_STATUS_OF, type Problem } from '@llmgw/domain';
import type { Logger } from './logger.factory';
import { ROOT_LOGGER } from './observability.module';

/** Base of every problem `type` URI llmgw's REST APIs answer with; the rest names the kind. */
export const PROBLEM_TYPE_BASE = 'https://llmgw.dev/problems/';

interface KindSpec {
  /** The domain error code the kind belongs to; its status is that code's unless `status` says. */
  readonly code: ErrorCode;
  readonly title: string;
  /** A status more precise than the code's, for refusals HTTP names itself (405, 413, 415, 422). */
  readonly status?: number;
}

/** Every kind of problem the REST APIs answer: the last segment of `type`, with its code and title. */
export const PROBLEM_KINDS = {
  'bad-request': { code: ErrorCode.InvalidArgument, title: 'Bad request' },
  'unparseable-body': { code: ErrorCode.InvalidArgument, title: 'Request body cannot be parsed' },
  unauthorized: { code: ErrorCode.Unauthenticated, title: 'Missing or wrong admin token' },
  forbidden: { code: ErrorCode.PermissionDenied, title: 'Forbidden' },
  'not-found': { code: ErrorCode.NotFound, title: 'Not found' },
  'method-not-allowed': { code: ErrorCode.InvalidArgument, status: 405, title: 'Method not allowed' },
  conflict: { code: ErrorCode.Conflict, title: 'Changed concurrently' },
  'precondition-failed': { code: ErrorCode.PreconditionFailed, title: 'Revision is not current' },
  'body-too-large': { code: ErrorCode.InvalidArgument, status: 413, title: 'Request body too large' },
  'unsupported-media-type': { code: ErrorCode.InvalidArgument, status: 415, title: 'Unsupported media type' },
  'invalid-body': { code: ErrorCode.InvalidArgument, status: 422, title: 'Request body is not what this route takes' },
  'invalid-catalog': { code: ErrorCode.InvalidArgument, status: 422, title: 'Invalid catalog' },
  'document-too-complex': { code: ErrorCode.InvalidArgument, status: 422, title: 'Catalog document nests too deep or uses too many aliases' },
  unplaceable: { code: ErrorCode.Unplaceable, title: 'Cannot be placed on the fleet' },
  'limit-reached': { code: ErrorCode.ResourceExhausted, title: 'A limit refused the request' },
  fenced: { code: ErrorCode.Fenced, title: 'This controller no longer leads; retry' },
  unavailable: { code: ErrorCode.Unavailable, title: 'Service unavailable' },
  internal: { code: ErrorCode.Internal, title: 'Internal error' },
} as const satisfies Record<string, KindSpec>;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

/** The kind a plain DomainError answers as; exhaustive, so a new code cannot go unmapped. */
export const KIND_OF_CODE: Readonly<Record<ErrorCode, ProblemKind>> = {
  [ErrorCode.InvalidArgument]: 'bad-request',
  [ErrorCode.Unauthenticated]: 'unauthorized',
  [ErrorCode.PermissionDenied]: 'forbidden',
  [ErrorCode.NotFound]: 'not-found',
  [ErrorCode.Conflict]: 'conflict',
  [ErrorCode.PreconditionFailed]: 'precondition-failed',
  [ErrorCode.Unplaceable]: 'unplaceable',
  [ErrorCode.ResourceExhausted]: 'limit-reached',
  [ErrorCode.Internal]: 'internal',
  [ErrorCode.Unavailable]: 'unavailable',
  [ErrorCode.Fenced]: 'fenced',
};

/** The HTTP status of a kind: its own where HTTP names the refusal, else its code's. */
export function statusOfKind(kind: ProblemKind): number {
  const spec: KindSpec = PROBLEM_KINDS[kind];
  return spec.status ?? HTTP_STATUS_OF[spec.code];
}

/** Nest's and the body parser's own HTTP refusals (unknown route, body too large, ...) → kinds. */
const KIND_OF_STATUS: Readonly<Record<number, ProblemKind>> = {
  400: 'bad-request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not-found',
  405: 'method-not-allowed',
  413: 'body-too-large',
  415: 'unsupported-media-type',
  422: 'invalid-body',
};

/** The RFC 9457 body of every error of llmgw's REST APIs (`application/problem+json`). */
export interface ProblemDocument {
  /** `https://llmgw.dev/problems/<kind>`. */
  type: string;
  title: string;
  status: number;
  /** What happened to this request. */
  detail: string;
  /** The domain error code, the same word on every transport. */
  code: ErrorCode;
  /** Every input problem with its path (`models[1].profiles[0].gpuClass`); empty when none apply. */
  problems: Problem[];
  /** Set on 500s only: the id logged with the error, for the operator to search for. */
  errorId?: string;
  /** Set on 409/412 of a revisioned resource: the revision that is current now. */
  currentRevision?: number;
  /** Set when a document limit refused the body: which one (`maxDepth`), and its value. */
  limit?: { name: string; value: number };
}

interface ProblemExtra {
  currentRevision?: number;
  headers?: Record<string, string>;
  limit?: { name: string; value: number };
}

/**
 * An error that becomes exactly one problem+json answer: its kind decides status, code and title;
 * `detail` says what happened to this request, `problems` lists every input problem.
 */
export class ProblemError extends Error {
  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly problems: readonly Problem[] = [],
    readonly extra: ProblemExtra = {},
  ) {
    super(detail);
    this.name = 'ProblemError';
  }

  get status(): number {
    return statusOfKind(this.kind);
  }

  toBody(): ProblemDocument {
    return {
      ...problemDocument(this.kind, this.detail, this.problems),
      ...(this.extra.currentRevision !== undefined && { currentRevision: this.extra.currentRevision }),
      ...(this.extra.limit !== undefined && { limit: { ...this.extra.limit } }),
    };
  }
}

/** The problem+json body for `kind`. */
export function problemDocument(kind: ProblemKind, detail: string, problems: readonly Problem[] = []): ProblemDocument {
  return {
    type: `${PROBLEM_TYPE_BASE}${kind}`,
    title: PROBLEM_KINDS[kind].title,
    status: statusOfKind(kind),
    detail,
    code: PROBLEM_KINDS[kind].code,
    problems: problems.map((p) => ({ path: p.path, message: p.message })),
  };
}

export interface ProblemFilterOptions {
  /** The logger context, e.g. `CatalogApi`. */
  readonly context: string;
  /** The realm of the `WWW-Authenticate: Bearer` challenge every 401 carries. */
  readonly realm: string;
  /** Gives an app's own error classes a more precise kind than their code's (e.g. `invalid-catalog`). */
  readonly refine?: (error: unknown) => ProblemError | undefined;
}

/**
 * The one error mapper of llmgw's REST APIs (catalog and controller admin): every failure is
 * answered as `application/problem+json`.
 * - A ProblemError with its kind; a DomainError with its code's kind and status
 *   (HTTP_STATUS_OF), so both APIs answer the same status for the same code.
 * - Nest's HTTP errors (an unknown route is its 404) and the body parser's client errors (malformed
 *   JSON 400, body too large 413, unsupported charset 415) with their status, and the `problems`
 *   a thrown HttpException's response carries.
 * - Anything else is a 500 that names an error id and logs the cause, never a stack trace.
 * Every 401 carries a Bearer challenge and every 503 `Retry-After: 1`. Register it app-wide with
 * `problemFilterProvider`, so errors raised before any route is chosen come here too.
 */
@Catch()
export class ProblemExceptionFilter implements ExceptionFilter {
  private readonly log: Logger;

  constructor(
    logger: Logger,
    private readonly options: ProblemFilterOptions,
  ) {
    this.log = logger.child({ context: options.context });
  }

  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<ServerResponse>();
    const { doc, headers } = this.toProblem(error);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.statusCode = doc.status;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    if (doc.status === 401) res.setHeader('www-authenticate', `Bearer realm="${this.options.realm}"`);
    if (doc.status === 503) res.setHeader('retry-after', '1');
    res.setHeader('content-type', 'application/problem+json');
    res.setHeader('cache-control', 'no-store');
    res.end(JSON.stringify(doc));
  }

  /** The document (and extra headers) an error is answered with. */
  toProblem(error: unknown): { doc: ProblemDocument; headers: Record<string, string> } {
    const refined = this.options.refine?.(error) ?? error;
    if (refined instanceof ProblemError) return { doc: refined.toBody(), headers: refined.extra.headers ?? {} };
    if (refined instanceof DomainError && refined.code !== ErrorCode.Internal) {
      const kind = KIND_OF_CODE[refined.code];
      if (kind === 'unavailable' || kind === 'fenced') this.log.warn({ code: refined.code, err: refined.message }, 'answered 503');
      return { doc: problemDocument(kind, refined.message.split('\n')[0], refined.problems), headers: {} };
    }
    const status = refined instanceof HttpException ? refined.getStatus() : clientErrorStatus(refined);
    if (status !== undefined && status >= 400 && status < 500) {
      const response = refined instanceof HttpException ? refined.getResponse() : undefined;
      const problems = typeof response === 'object' && response !== null && Array.isArray((response as { problems?: unknown }).problems) ? (response as { problems: Problem[] }).problems : [];
      const kind = KIND_OF_STATUS[status];
      const message = (refined as Error).message;
      const doc = kind ? problemDocument(kind, message, problems) : { ...problemDocument('bad-request', message, problems), status, title: 'Request refused' };
      return { doc, headers: {} };
    }
    const errorId = randomUUID();
    this.log.error({ errorId, err: error }, 'unhandled error answering a request');
    return { doc: { ...problemDocument('internal', `internal error; search the server log for errorId ${errorId}`), errorId }, headers: {} };
  }
}

/** Registers the problem filter app-wide (APP_FILTER) with this app's options. */
export function problemFilterProvider(options: ProblemFilterOptions): Provider {
  return { provide: APP_FILTER, useFactory: (logger: Logger) => new ProblemExceptionFilter(logger, options), inject: [ROOT_LOGGER] };
}

/**
 * The 4xx status of a client error raised by Express's body parser (an `http-errors` error:
 * `expose` true, a numeric `status`), e.g. 413 for a body over the limit; undefined for
 * anything else, which stays a 500.
 */
function clientErrorStatus(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const { status, expose } = error as Error & { status?: unknown; expose?: unknown };
  return expose === true && typeof status === 'number' && Number.isInteger(status) ? status : undefined;
}
