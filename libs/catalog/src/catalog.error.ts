import { DomainError, ErrorCode, formatProblems, type Problem } from '@llmgw/domain';

/**
 * A catalog document that cannot become a `Catalog`: code `InvalidArgument`, every problem found
 * with its path. The message is a summary line followed by one `path: message` line per problem.
 */
export class CatalogError extends DomainError {
  constructor(problems: readonly Problem[], summary = invalidSummary(problems.length)) {
    super(ErrorCode.InvalidArgument, `${summary}\n${formatProblems(problems)}`, Object.freeze([...problems]));
    this.name = 'CatalogError';
  }
}

function invalidSummary(n: number): string {
  return `invalid catalog: ${n} problem${n === 1 ? '' : 's'}`;
}
