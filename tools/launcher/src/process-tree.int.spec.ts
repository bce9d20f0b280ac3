import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { describeProcess, descendantsOf, isAlive, parseProcStat, ProcessTreeTracker, readProcessTable, type ProcInfo } from './process-tree';

const stat = (pid: number, comm: string, ppid: number, start: string, state = 'S'): string =>
  `${pid} (${comm}) ${state} ${ppid} ${pid} ${pid} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 ${start} 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n`;

describe('parseProcStat', () => {
  it('reads pid, parent, group, state and start time, even with spaces and parentheses in the name', () => {
    expect(parseProcStat(stat(42, 'node (x) y', 7, '12345'))).toEqual({ pid: 42, ppid: 7, pgrp: 42, state: 'S', startTime: '12345', comm: 'node (x) y' });
  });
  it.each(['', 'garbage', '12 (x) S'])('refuses %j', (text) => {
    expect(parseProcStat(text)).toBeUndefined();
  });
});

describe('descendantsOf', () => {
  it('finds children and grandchildren, not the roots, not strangers', () => {
    const table = new Map<number, ProcInfo>(
      [
        [1, 0],
        [10, 1],
        [11, 10],
        [12, 11],
        [20, 1],
        [13, 10],
      ].map(([pid, ppid]) => [pid, { pid, ppid, pgrp: pid, state: 'S', startTime: '1', comm: 'x' }]),
    );
    expect(descendantsOf(table, [10]).map((p) => p.pid).sort()).toEqual([11, 12, 13]);
  });
});

describe('ProcessTreeTracker on a fake /proc', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-proc-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const put = (pid: number, ppid: number, start: string, state = 'S'): void => {
    mkdirSync(join(dir, String(pid)), { recursive: true });
    writeFileSync(join(dir, String(pid), 'stat'), stat(pid, 'p', ppid, start, state));
  };

  it('sees a known process as it is now: renamed by an exec, in a group of its own after setsid', () => {
    put(200, 1, '5');
    put(201, 200, '6'); // seen between fork and exec: still named and grouped like its parent
    writeFileSync(join(dir, '201', 'stat'), stat(201, 'node', 200, '6').replace('S 200 201 201', 'S 200 200 200'));
    const tracker = new ProcessTreeTracker(dir);
    tracker.addRoot(200);
    tracker.refresh();
    expect(tracker.alive().find((p) => p.pid === 201)).toMatchObject({ comm: 'node', pgrp: 200 });
    writeFileSync(join(dir, '201', 'stat'), stat(201, 'sleep', 200, '6'));
    tracker.refresh();
    expect(tracker.alive().find((p) => p.pid === 201)).toMatchObject({ comm: 'sleep', pgrp: 201 });
    rmSync(join(dir, '200'), { recursive: true });
    rmSync(join(dir, '201'), { recursive: true });
  });

  it('keeps knowing an orphaned grandchild, and forgets a pid reused by another process', () => {
    put(100, 1, '5'); // the launched app
    put(101, 100, '6'); // an engine it started
    const tracker = new ProcessTreeTracker(dir);
    tracker.addRoot(100);
    tracker.refresh();
    expect(tracker.alive().map((p) => p.pid).sort()).toEqual([100, 101]);

    // The app dies: the engine is re-parented to init, but still known.
    rmSync(join(dir, '100'), { recursive: true });
    put(101, 1, '6');
    tracker.refresh();
    expect(tracker.alive().map((p) => p.pid)).toEqual([101]);

    // The engine exits and its pid is reused by something else (another start time): not ours.
    put(101, 1, '999');
    expect(tracker.alive()).toEqual([]);
    put(102, 1, '7', 'Z');
    expect(isAlive({ pid: 102, startTime: '7' }, dir)).toBe(false);
  });
});

describe('describeProcess', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-cmdline-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  it.each([
    [['/usr/bin/node', '/r/tools/llama-engine/bin/llama-server-node', '-m', 'x.gguf'], 'llama-server-node'],
    [['node', '/r/tools/run.cjs', '/r/tools/sim-engine/src/main.ts', '--port', '1'], 'sim-engine'],
    [['node', '--enable-source-maps', '/r/tools/llama-engine/src/model.worker.mjs'], 'model.worker.mjs'],
    [['/usr/local/bin/llama-server', '-m', 'x'], 'llama-server'],
  ])('%j → %s', (argv, expected) => {
    mkdirSync(join(dir, '7'), { recursive: true });
    writeFileSync(join(dir, '7', 'cmdline'), `${argv.join('\0')}\0`);
    expect(describeProcess(7, dir)).toBe(expected);
  });
  it('is undefined for a process that is gone', () => expect(describeProcess(999_999, dir)).toBeUndefined());
});

describe('readProcessTable on the real /proc', () => {
  it('sees a real grandchild that lives in its own process group', async () => {
    // A shell that starts a detached sleeper, like an agent starting an engine.
    const parent = spawn(process.execPath, ['-e', "require('child_process').spawn('sleep', ['120'], { detached: true, stdio: 'ignore' }); setInterval(() => {}, 1000)"], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    // What the parent said and how it ended, for the failure message should the sleeper never show.
    let stderr = '';
    let ended = 'running';
    parent.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    parent.once('exit', (code, signal) => (ended = `exited with ${code ?? signal}`));
    try {
      const tracker = new ProcessTreeTracker();
      tracker.addRoot(parent.pid as number);
      const sleeper = await waitFor(
        () => {
          tracker.refresh();
          const alive = tracker.alive();
          const found = alive.find((p) => p.comm === 'sleep');
          if (found) return found;
          const children = [...readProcessTable().values()].filter((p) => p.ppid === parent.pid);
          throw new Error(`parent ${parent.pid} ${ended}; tracked alive ${JSON.stringify(alive)}; its children now ${JSON.stringify(children)}; stderr ${JSON.stringify(stderr.slice(-500))}`);
        },
        { deadlineMs: 60_000, message: 'the detached sleeper' },
      );
      expect(sleeper.pgrp).toBe(sleeper.pid);
      expect(readProcessTable().get(sleeper.pid)?.ppid).toBe(parent.pid);
      parent.kill('SIGKILL');
      await waitFor(() => readProcessTable().get(sleeper.pid)?.ppid !== parent.pid, { deadlineMs: 5_000, message: 'sleeper re-parented' });
      tracker.refresh();
      expect(tracker.signalAll('SIGKILL').map((p) => p.pid)).toEqual([sleeper.pid]);
      await waitFor(() => !isAlive(sleeper), { deadlineMs: 5_000, message: 'sleeper gone' });
    } finally {
      parent.kill('SIGKILL');
    }
  }, 90_000);
});
