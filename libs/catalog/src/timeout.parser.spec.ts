import { describe, expect, it } from 'vitest';
import { parseTimeout } from './timeout.parser';

describe('parseTimeout', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['100ms', 100],
  ])('reads %s as %i ms', (text, ms) => {
    expect(parseTimeout(text)).toEqual({ ok: true, ms });
  });

  it.each([
    [30, /must be a duration such as "500ms"/],
    ['30', /must be a duration/],
    ['1.5s', /must be a duration/],
    ['-1s', /must be a duration/],
    ['99ms', /between 100ms and 1h \(got "99ms"\)/],
    ['2h', /between 100ms and 1h/],
    [null, /got null/],
  ])('refuses %j', (value, message) => {
    const r = parseTimeout(value);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.message).toMatch(message);
  });
});
