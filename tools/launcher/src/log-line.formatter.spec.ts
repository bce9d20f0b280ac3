import { describe, expect, it } from 'vitest';
import { formatLogLine, formatOwnLine, LineSplitter } from './log-line.formatter';

const plain = { color: false, prefixWidth: 10 };

describe('formatLogLine', () => {
  it.each([
    [
      'a pino line: level, message, context and the other short fields',
      '{"level":"info","time":"2026-01-01T00:00:00.000Z","pid":7,"hostname":"h","name":"llmgw-router","context":"ControllerWatch","msg":"snapshot applied","revision":3,"endpoints":2}',
      '[router]     info  snapshot applied (ControllerWatch)  revision=3 endpoints=2',
    ],
    [
      'numeric pino levels',
      '{"level":50,"msg":"boom"}',
      '[router]     error boom',
    ],
    [
      'an error shows its message and first frame',
      '{"level":"error","msg":"failed","err":{"type":"Error","message":"bad thing","stack":"Error: bad thing\\n    at f (a.ts:1:2)\\n    at g (b.ts:3:4)"}}',
      '[router]     error failed  err="bad thing (at f (a.ts:1:2))"',
    ],
    ['a value with spaces is quoted', '{"level":"warn","msg":"slow","reason":"no route to host"}', '[router]     warn  slow  reason="no route to host"'],
    ['text that is not JSON stays as it is', 'llmgw-router: invalid configuration (1 problem):', '[router]     llmgw-router: invalid configuration (1 problem):'],
    ['JSON that is not a log record stays as it is', '{"a":1}', '[router]     {"a":1}'],
  ])('%s', (_name, line, expected) => {
    expect(formatLogLine('router', line, plain)).toBe(expected);
  });

  it('cuts long values and drops null ones', () => {
    const out = formatLogLine('agent', JSON.stringify({ level: 'info', msg: 'm', long: 'x'.repeat(200), gone: null }), plain) ?? '';
    expect(out).toMatch(/long=x{79}…$/);
    expect(out).not.toContain('gone');
  });

  it("drops Nest's info-level start-up lines but keeps its warnings", () => {
    expect(formatLogLine('router', '{"level":"info","context":"RouterExplorer","msg":"Mapped {/x, GET} route"}', plain)).toBeUndefined();
    expect(formatLogLine('router', '{"level":"warn","context":"InstanceLoader","msg":"odd"}', plain)).toBe('[router]     warn  odd (InstanceLoader)');
  });

  it('colours only when asked', () => {
    const line = '{"level":"error","msg":"x"}';
    expect(formatLogLine('router', line, { ...plain, color: true })).toContain('\x1b[31m');
    expect(formatLogLine('router', line, plain)).not.toContain('\x1b[');
    expect(formatOwnLine('hello', plain)).toBe('[llmgw]      hello');
  });
});

describe('LineSplitter', () => {
  it('returns whole lines across chunks, CRLF included, and the rest on flush', () => {
    const s = new LineSplitter();
    expect(s.push('ab')).toEqual([]);
    expect(s.push('c\r\nde\nf')).toEqual(['abc', 'de']);
    expect(s.flush()).toEqual(['f']);
    expect(s.flush()).toEqual([]);
  });
});
