import { ProblemError } from '@llmgw/observability';

/** The ETag of a catalog revision: a strong entity tag holding the revision number, e.g. `"7"`. */
export function revisionTag(revision: number): string {
  return `"${revision}"`;
}

/** What an `If-Match` header asks for: nothing (unconditional), any existing catalog (`*`), or one of some revisions. */
export type IfMatch = { kind: 'none' } | { kind: 'any' } | { kind: 'revisions'; revisions: readonly number[] };

const TAG_RE = /^"(0|[1-9]\d{0,14})"$/;

/**
 * Parses `If-Match`: absent → none; `*` → any; otherwise a comma-separated list of strong tags
 * `"N"` as {@link revisionTag} writes them. Weak tags (`W/"N"`) never match a write (RFC 9110
 * strong comparison) and are refused, as is anything else, with a 400 naming the header.
 */
export function parseIfMatch(header: string | string[] | undefined): IfMatch {
  if (header === undefined) return { kind: 'none' };
  const text = Array.isArray(header) ? header.join(',') : header;
  if (text.trim() === '*') return { kind: 'any' };
  const revisions: number[] = [];
  for (const raw of text.split(',').map((part) => part.trim())) {
    const match = TAG_RE.exec(raw);
    if (!match) {
      const why = raw.startsWith('W/') ? 'a weak tag never matches a write' : 'expected an entity tag such as "7" (with the quotes), as the ETag header gave it';
      throw new ProblemError('bad-request', `If-Match ${JSON.stringify(raw)}: ${why}`, [{ path: 'If-Match', message: why }]);
    }
    revisions.push(Number(match[1]));
  }
  return { kind: 'revisions', revisions };
}

/**
 * The revision a conditional write must still find current, given the revision current now:
 * undefined for an unconditional write; the matching revision; or a 412 problem when none matches.
 */
export function expectedRevision(ifMatch: IfMatch, current: number): number | undefined {
  if (ifMatch.kind === 'none') return undefined;
  if (ifMatch.kind === 'any') {
    if (current === 0) throw stale('If-Match: * needs an existing catalog, and none is stored yet', current);
    return current;
  }
  if (ifMatch.revisions.includes(current)) return current;
  throw stale(`If-Match names revision ${ifMatch.revisions.join(', ')}, but the current revision is ${current}`, current);
}

/** The 412 answer for a write whose precondition no longer holds. */
export function stale(detail: string, current: number): ProblemError {
  return new ProblemError('precondition-failed', `${detail}; fetch the catalog again and reapply your change`, [], {
    currentRevision: current,
    headers: { etag: revisionTag(current) },
  });
}
