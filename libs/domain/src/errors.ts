/** Every domain error carries one of these codes; each transport maps them exhaustively. */
export enum ErrorCode {
  InvalidArgument = 'invalid_argument',
  NotFound = 'not_found',
  Conflict = 'conflict',
  PreconditionFailed = 'precondition_failed',
  Unauthenticated = 'unauthenticated',
  PermissionDenied = 'permission_denied',
  ResourceExhausted = 'resource_exhausted',
  Unavailable = 'unavailable',
  Unplaceable = 'unplaceable',
  Fenced = 'fenced',
  Internal = 'internal',
}

/** One thing wrong with an input, with the path that locates it (e.g. `models[1].profiles[0].gpuClass`). */
export interface Problem {
  path: string;
  message: string;
}

/** An error a caller can act on: a code, a message and, for invalid input, every problem found. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly problems: readonly Problem[] = [],
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/** Formats problems one per line as `path: message`. */
export function formatProblems(problems: readonly Problem[]): string {
  return problems.map((p) => (p.path ? `${p.path}: ${p.message}` : p.message)).join('\n');
}
