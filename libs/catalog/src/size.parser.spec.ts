import { describe, expect, it } from 'vitest';
import { parseSize } from './size.parser';

describe('parseSize', () => {
  it.each([
    [16_000_000_000, 16_000_000_000],
    ['16GB', 16_000_000_000],
    ['16 GB', 16_000_000_000],
    ['15.5GiB', 16_642_998_272],
    ['800MB', 800_000_000],
    ['1KiB', 1024],
    ['2KB', 2000],
    ['1.5MiB', 1_572_864],
    ['0.1GB', 100_000_000],
    ['1TB', 1e12],
    ['512B', 512],
  ])('%s → %d bytes', (input, bytes) => {
    expect(parseSize(input)).toEqual({ ok: true, bytes });
  });

  it.each([
    [0, 'positive whole number'],
    [-5, 'positive whole number'],
    [1.5, 'positive whole number'],
    [2 ** 60, 'positive whole number'],
    ['16gb', 'is not a size'],
    ['16Gb', 'is not a size'],
    ['16', 'is not a size'],
    ['GB', 'is not a size'],
    ['-1GB', 'is not a size'],
    ['1e3MB', 'is not a size'],
    ['0GB', 'must be greater than zero'],
    ['1.5B', 'not a whole number of bytes'],
    ['99999999TB', 'too large'],
    [null, 'got null'],
    [true, 'got true'],
  ])('%s is refused (%s)', (input, message) => {
    const r = parseSize(input);
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.message).toContain(message);
  });
});
