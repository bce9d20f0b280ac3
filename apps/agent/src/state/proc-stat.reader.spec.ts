import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isSameLiveProcess, parseProcStat, readProcStat } from './proc-stat.reader';

// A real line from /proc/<pid>/stat (a node process), and variations of the command name.
const LINE = '4242 (node) S 1 4242 4242 0 -1 4194560 12345 0 0 0 120 30 0 0 20 0 11 0 987654 1234567890 12345 18446744073709551615 1 1 0 0 0 0 0 16781312 134235650 0 0 0 17 1 0 0 0 0 0';

describe('parseProcStat', () => {
  it('reads state, process group and start time (field 22)', () => {
    expect(parseProcStat(LINE)).toEqual({ pid: 4242, state: 'S', pgrp: 4242, startTime: '987654' });
  });

  it.each([
    ['spaces', '(my engine)'],
    ['parentheses', '(python3 (vllm))'],
    ['a closing parenthesis and digits', '(x) 1 2 3)'],
  ])('counts fields after the last ")" when the command name holds %s', (_what, comm) => {
    expect(parseProcStat(LINE.replace('(node)', comm))).toMatchObject({ state: 'S', pgrp: 4242, startTime: '987654' });
  });

  it.each(['', 'garbage', '12 (x)', '12 (x) S 1 2 3'])('refuses %j', (text) => {
    expect(parseProcStat(text)).toBeUndefined();
  });
});

describe('readProcStat / isSameLiveProcess', () => {
  it('recognises this very process and no other start time', () => {
    const self = readProcStat(process.pid);
    expect(self?.pid).toBe(process.pid);
    expect(isSameLiveProcess(process.pid, self?.startTime as string)).toBe(true);
    expect(isSameLiveProcess(process.pid, String(Number(self?.startTime) + 1))).toBe(false);
  });

  it('a pid that does not exist, a zombie and a dead one are not the process', () => {
    const dir = mkdtempSync(join(tmpdir(), 'llmgw-proc-'));
    try {
      mkdirSync(join(dir, '77'));
      writeFileSync(join(dir, '77', 'stat'), LINE.replace('4242 (node) S', '77 (node) Z'));
      mkdirSync(join(dir, '78'));
      writeFileSync(join(dir, '78', 'stat'), LINE.replace('4242 (node) S', '78 (node) X'));
      expect(isSameLiveProcess(77, '987654', dir)).toBe(false);
      expect(isSameLiveProcess(78, '987654', dir)).toBe(false);
      expect(isSameLiveProcess(79, '987654', dir)).toBe(false);
      expect(readProcStat(-1)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
