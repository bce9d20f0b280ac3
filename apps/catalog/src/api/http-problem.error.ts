import type { Problem } from '@llmgw/domain';

/** Base of every problem `type` URI this API answers with; the fragment names the problem. */
export const PROBLEM_TYPE_BASE = 'https://llmgw.dev/problems/';

/** The RFC 9457 body every error of the catalog API has (`application/problem+json`). */
export interface ProblemBody {
  /** A URI naming the kind of problem, e.g. `https://llmgw.dev/problems/invalid-catalog`. */
  type: string;
  title: string;
  status: number;
  detail: string;
  /** Every input problem with its path (`models[1].profiles[0].gpuClass`); empty when none apply. */
  problems: Problem[];
  /** Set on 500s only: the id logged with the error, for the operator to search for. */
  errorId?: string;
  /** Set on 409/412: the revision that is current now. */
  currentRevision?: number;
  /** Set when a document limit refused the body: which one (`maxDepth`), and its value. */
  limit?: { name: string; value: number };
}

/** Kinds of problems the API answers, with their HTTP status and title. */
export const PROBLEM_KINDS = {
  'bad-request': { status: 400, title: 'Bad request' },
  'unparseable-body': { status: 400, title: 'Request body cannot be parsed' },
  unauthorized: { status: 401, title: 'Missing or wrong admin token' },
  'not-found': { status: 404, title: 'Not found' },
  conflict: { status: 409, title: 'Catalog changed concurrently' },
  'precondition-failed': { status: 412, title: 'Catalog revision is not current' },
  'body-too-large': { status: 413, title: 'Request body too large' },
  'unsupported-media-type': { status: 415, title: 'Unsupported media type' },
  'invalid-catalog': { status: 422, title: 'Invalid catalog' },
  'document-too-complex': { status: 422, title: 'Catalog document nests too deep or uses too many aliases' },
  unavailable: { status: 503, title: 'Store unavailable' },
  internal: { status: 500, title: 'Internal error' },
} as const;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

/**
 * An error that becomes exactly one problem+json answer: its kind decides status and title,
 * `detail` says what happened to this request, `problems` lists every input problem.
 */
export class HttpProblemError extends Error {
  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly problems: readonly Problem[] = [],
    readonly extra: { currentRevision?: number; headers?: Record<string, string>; limit?: { name: string; value: number } } = {},
  ) {
    super(detail);
    this.name = 'HttpProblemError';
  }

  get status(): number {
    return PROBLEM_KINDS[this.kind].status;
  }

  toBody(): ProblemBody {
    const body = problemBody(this.kind, this.detail, this.problems, this.extra.currentRevision);
    return this.extra.limit ? { ...body, limit: { ...this.extra.limit } } : body;
  }
}

/** The problem+json body for `kind`. */
export function problemBody(kind: ProblemKind, detail: string, problems: readonly Problem[] = [], currentRevision?: number): ProblemBody {
  const { status, title } = PROBLEM_KINDS[kind];
  return {
    type: `${PROBLEM_TYPE_BASE}${kind}`,
    title,
    status,
    detail,
    problems: problems.map((p) => ({ path: p.path, message: p.message })),
    ...(currentRevision !== undefined ? { currentRevision } : {}),
  };
}
