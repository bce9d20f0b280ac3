import { describe, expect, it } from 'vitest';
import { expectedRevision, parseIfMatch, revisionTag } from './entity-tag.parser';
import { ProblemError } from '@llmgw/observability';

function problemOf(fn: () => unknown): ProblemError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ProblemError) return error;
    throw error;
  }
  throw new Error('expected an ProblemError');
}

describe('If-Match', () => {
  it.each([
    [undefined, { kind: 'none' }],
    ['*', { kind: 'any' }],
    [' * ', { kind: 'any' }],
    ['"0"', { kind: 'revisions', revisions: [0] }],
    ['"7", "12"', { kind: 'revisions', revisions: [7, 12] }],
    [['"3"', '"4"'], { kind: 'revisions', revisions: [3, 4] }],
  ])('%j parses', (header, expected) => expect(parseIfMatch(header)).toEqual(expected));

  it.each(['7', 'W/"7"', '"07"', '"-1"', '"1.5"', '""', '', '"7",', '"9999999999999999"', '"a"'])('%j is a 400 naming the header', (header) => {
    const error = problemOf(() => parseIfMatch(header));
    expect(error.status).toBe(400);
    expect(error.problems).toEqual([{ path: 'If-Match', message: expect.any(String) }]);
  });

  it('decides the revision a write must still find', () => {
    expect(expectedRevision({ kind: 'none' }, 5)).toBeUndefined();
    expect(expectedRevision({ kind: 'any' }, 5)).toBe(5);
    expect(expectedRevision({ kind: 'revisions', revisions: [4, 5] }, 5)).toBe(5);
    expect(expectedRevision({ kind: 'revisions', revisions: [0] }, 0)).toBe(0);
    const stale = problemOf(() => expectedRevision({ kind: 'revisions', revisions: [4] }, 5));
    expect(stale.status).toBe(412);
    expect(stale.toBody()).toMatchObject({ status: 412, currentRevision: 5 });
    expect(stale.extra.headers).toEqual({ etag: revisionTag(5) });
    expect(problemOf(() => expectedRevision({ kind: 'any' }, 0)).status).toBe(412);
  });
});
