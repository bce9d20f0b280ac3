import { describe, expect, it } from 'vitest';
import { parseRouting } from './routing-policy.parser';

describe('parseRouting', () => {
  it.each([
    [{ policy: 'least-load' }, { policy: 'least-load' }],
    [{ policy: 'round-robin' }, { policy: 'round-robin' }],
    [{ policy: 'prefix-affinity' }, { policy: 'prefix-affinity' }],
    [
      { policy: 'prefix-affinity', prefixAffinity: { blockChars: 16, maxBlocks: 1024, epsilon: 10 } },
      { policy: 'prefix-affinity', prefixAffinity: { blockChars: 16, maxBlocks: 1024, epsilon: 10 } },
    ],
    [{ policy: 'prefix-affinity', prefixAffinity: { epsilon: 0.1 } }, { policy: 'prefix-affinity', prefixAffinity: { epsilon: 0.1 } }],
  ])('accepts %j', (raw, want) => {
    expect(parseRouting(raw, 'r')).toEqual({ ok: true, routing: want });
  });

  it.each([
    ['not a mapping', 'prefix-affinity', 'r', 'must be a mapping with a policy'],
    ['no policy', {}, 'r.policy', 'must be one of least-load, prefix-affinity, round-robin'],
    ['an unknown policy', { policy: 'random' }, 'r.policy', 'must be one of'],
    ['an unknown field', { policy: 'least-load', weight: 1 }, 'r.weight', 'unknown field'],
    ['parameters for another policy', { policy: 'round-robin', prefixAffinity: {} }, 'r.prefixAffinity', 'only with policy prefix-affinity'],
    ['an unknown parameter', { policy: 'prefix-affinity', prefixAffinity: { blocks: 3 } }, 'r.prefixAffinity.blocks', 'unknown field'],
    ['epsilon 0', { policy: 'prefix-affinity', prefixAffinity: { epsilon: 0 } }, 'r.prefixAffinity.epsilon', 'above 0 and at most 10 (got 0)'],
    ['epsilon negative', { policy: 'prefix-affinity', prefixAffinity: { epsilon: -1 } }, 'r.prefixAffinity.epsilon', 'above 0'],
    ['epsilon as text', { policy: 'prefix-affinity', prefixAffinity: { epsilon: '0.2' } }, 'r.prefixAffinity.epsilon', 'got "0.2"'],
    ['epsilon too large', { policy: 'prefix-affinity', prefixAffinity: { epsilon: 11 } }, 'r.prefixAffinity.epsilon', 'at most 10'],
    ['a fractional block size', { policy: 'prefix-affinity', prefixAffinity: { blockChars: 64.5 } }, 'r.prefixAffinity.blockChars', 'integer from 16 to 65536'],
    ['a tiny block size', { policy: 'prefix-affinity', prefixAffinity: { blockChars: 8 } }, 'r.prefixAffinity.blockChars', 'integer from 16'],
    ['no blocks', { policy: 'prefix-affinity', prefixAffinity: { maxBlocks: 0 } }, 'r.prefixAffinity.maxBlocks', 'integer from 1 to 1024'],
  ])('refuses %s, naming the path', (_what, raw, path, message) => {
    const r = parseRouting(raw, 'r');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems).toContainEqual({ path, message: expect.stringContaining(message) });
  });

  it('lists every problem at once', () => {
    const r = parseRouting({ policy: 'prefix-affinity', prefixAffinity: { blockChars: 1, maxBlocks: 0, epsilon: 0 } }, 'r');
    expect(r.ok ? [] : r.problems.map((p) => p.path)).toEqual(['r.prefixAffinity.blockChars', 'r.prefixAffinity.maxBlocks', 'r.prefixAffinity.epsilon']);
  });
});
