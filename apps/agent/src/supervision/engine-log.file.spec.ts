import { appendFileSync, closeSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EngineLogFile } from './engine-log.file';

describe('EngineLogFile', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'llmgw-log-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps at most N files of about the bound, newest first, while the writer keeps its descriptor', () => {
    const log = new EngineLogFile(join(dir, 'logs', 'r-1.log'), { maxBytes: 100, files: 3 });
    // The engine holds this descriptor for its whole life; rotation must not cut it off.
    const fd = log.openForAppend();
    try {
      for (let round = 0; round < 5; round++) {
        writeSync(fd, `round ${round} `.padEnd(150, '.') + '\n');
        expect(log.rotateIfNeeded()).toBe(true);
        expect(log.rotateIfNeeded()).toBe(false);
      }
      writeSync(fd, 'after the last rotation\n');
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(log.path, 'utf8')).toBe('after the last rotation\n');
    expect(readFileSync(`${log.path}.1`, 'utf8')).toMatch(/^round 4 /);
    expect(readFileSync(`${log.path}.2`, 'utf8')).toMatch(/^round 3 /);
    expect(existsSync(`${log.path}.3`)).toBe(false);
    expect(statSync(log.path).size).toBeLessThanOrEqual(100);
  });

  it('tails the last lines, oldest first, reaching into the previous file when the live one is short', () => {
    const log = new EngineLogFile(join(dir, 'r.log'), { maxBytes: 50, files: 2 });
    appendFileSync(log.path, 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n');
    log.rotateIfNeeded();
    log.note('engine exited with code 1');
    expect(log.tail(3)).toEqual(['ten', 'eleven', '--- llmgw-agent: engine exited with code 1']);
    expect(log.tail(1)).toEqual(['--- llmgw-agent: engine exited with code 1']);
    expect(new EngineLogFile(join(dir, 'none.log'), { maxBytes: 50, files: 2 }).tail(5)).toEqual([]);
  });

  it('one file means truncate in place; bounds below 1 are refused', () => {
    const log = new EngineLogFile(join(dir, 'r.log'), { maxBytes: 10, files: 1 });
    appendFileSync(log.path, 'x'.repeat(20));
    expect(log.rotateIfNeeded()).toBe(true);
    expect(statSync(log.path).size).toBe(0);
    expect(() => new EngineLogFile(log.path, { maxBytes: 10, files: 0 })).toThrow(/files must be >= 1/);
    expect(() => new EngineLogFile(log.path, { maxBytes: 0, files: 1 })).toThrow(/maxBytes must be >= 1/);
  });
});
