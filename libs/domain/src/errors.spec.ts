import { describe, expect, it } from 'vitest';
import { DomainError, ErrorCode, formatProblems } from './errors';

describe('formatProblems', () => {
  it('prints one problem per line with its path', () => {
    expect(formatProblems([{ path: 'models[0].name', message: 'required' }, { path: '', message: 'empty' }])).toBe(
      'models[0].name: required\nempty',
    );
  });
  it('keeps code and problems on DomainError', () => {
    const e = new DomainError(ErrorCode.InvalidArgument, 'bad', [{ path: 'a', message: 'b' }]);
    expect(e.code).toBe('invalid_argument');
    expect(e.problems).toHaveLength(1);
  });
});
