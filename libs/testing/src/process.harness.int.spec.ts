import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { killProcessesMentioning, processExists, spawnedCount, spawnProcess, stopAllSpawned, type SpawnedProcess } from './process.harness';
import { runTsEntry } from './repo-paths';
import { waitFor } from './wait-for';

const SERVER = join(__dirname, '__fixtures__', 'http-server.fixture.cjs');

afterAll(() => stopAllSpawned());

function startServer(...flags: string[]): Promise<SpawnedProcess> {
  return spawnProcess({
    command: process.execPath,
    args: [SERVER, ...flags],
    readyWhen: { stdoutMatch: /listening on (\d+)/ },
    deadlineMs: 10_000,
  });
}

function grandchildPid(proc: SpawnedProcess): number {
  const pid = Number(proc.stdout.match(/child (\d+)/)?.[1]);
  expect(pid).toBeGreaterThan(0);
  return pid;
}

async function expectGone(pid: number): Promise<void> {
  await waitFor(() => !processExists(pid), { deadlineMs: 5_000, message: `process ${pid} still running` });
}

describe('spawnProcess', () => {
  it('waits for the ready line, serves, and stops the whole process group on SIGTERM', async () => {
    const proc = await startServer();
    const port = Number(proc.readyMatch?.[1]);
    const child = grandchildPid(proc);
    expect(processExists(proc.pid)).toBe(true);
    expect(processExists(child)).toBe(true);

    const res = await fetch(`http://127.0.0.1:${port}/ok`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('/ok');

    // The grandchild ignores SIGTERM; stop() must still leave nothing of the group behind.
    expect(await proc.stop()).toEqual({ code: 0, signal: null });
    expect(processExists(proc.pid)).toBe(false);
    await expectGone(child);
  });

  it('escalates to SIGKILL after the grace period when SIGTERM is ignored', async () => {
    const proc = await startServer('--ignore-sigterm');
    const child = grandchildPid(proc);
    const started = performance.now();
    const result = await proc.stop('SIGTERM', 300);
    expect(result).toEqual({ code: null, signal: 'SIGKILL' });
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect(proc.stdout).toContain('ignoring SIGTERM');
    await expectGone(child);
  });

  it('kill9 ends the process and its children at once', async () => {
    const proc = await startServer();
    const child = grandchildPid(proc);
    expect(await proc.kill9()).toEqual({ code: null, signal: 'SIGKILL' });
    await expectGone(proc.pid);
    await expectGone(child);
  });

  it('is ready once an HTTP probe answers the expected status', async () => {
    const proc = await spawnProcess({
      command: process.execPath,
      args: [SERVER],
      readyWhen: {
        stdoutMatch: /listening on (\d+)/,
        http: { url: (p) => `http://127.0.0.1:${p.readyMatch?.[1]}/ok`, status: 200 },
      },
    });
    expect(proc.exit).toBeUndefined();
    await proc.stop();
  });

  it('rejects with the exit code and the output when the process dies before it is ready', async () => {
    const error = await startServer('--exit-early').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/exited before it was ready \(code 3/);
    expect((error as Error).message).toContain('fixture: refusing to start');
  });

  it('rejects at the deadline, naming what it waited for, and kills the process', async () => {
    const before = spawnedCount();
    const error = await spawnProcess({
      command: process.execPath,
      args: [SERVER, '--never-listen'],
      readyWhen: { stdoutMatch: /listening on (\d+)/ },
      deadlineMs: 1_500,
    }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/stdout never matched \/listening on \(\\d\+\)\/: not met within/);
    // Killed and unregistered; and if it got as far as starting its grandchild, that is gone too.
    expect(spawnedCount()).toBe(before);
    const child = (error as Error).message.match(/child (\d+)/)?.[1];
    if (child !== undefined) await expectGone(Number(child));
  });

  it('rejects when the HTTP probe keeps answering another status', async () => {
    const error = await spawnProcess({
      command: process.execPath,
      args: [SERVER],
      readyWhen: { stdoutMatch: /listening on (\d+)/, http: { url: (p) => `http://127.0.0.1:${p.readyMatch?.[1]}/nope` } },
      deadlineMs: 3_000,
    }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/GET http:\/\/127\.0\.0\.1:\d+\/nope never answered 200.*answered HTTP 404/);
  });

  it('reports a command that cannot be started', async () => {
    const error = await spawnProcess({ command: '/nonexistent/llmgw-binary' }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/spawn failed: .*ENOENT/);
  });

  it('waitForExit rejects at its deadline without killing, and resolves on exit', async () => {
    const proc = await startServer();
    await expect(proc.waitForExit(100)).rejects.toThrow(/still running after 100 ms/);
    proc.signal('SIGTERM');
    expect(await proc.waitForExit(5_000)).toEqual({ code: 0, signal: null });
    await proc.stop();
  });

  it('stopAllSpawned stops everything still registered', async () => {
    const a = await startServer();
    const b = await startServer();
    await stopAllSpawned();
    expect(spawnedCount()).toBe(0);
    await expectGone(a.pid);
    await expectGone(b.pid);
  });

  it('kills what a process spawned through the harness when that process exits without cleaning up', async () => {
    const entry = runTsEntry('libs/testing/src/__fixtures__/leaves-children.fixture.ts');
    const parent = await spawnProcess({ ...entry, readyWhen: { stdoutMatch: /spawned (\d+) (\d+)/ }, deadlineMs: 20_000 });
    expect(await parent.waitForExit(10_000)).toEqual({ code: 0, signal: null });
    const [, orphan, orphanChild] = parent.readyMatch ?? [];
    await expectGone(Number(orphan));
    await expectGone(Number(orphanChild));
    await parent.stop();
  });

  it('kills what a process spawned through the harness when a signal ends that process', async () => {
    const entry = runTsEntry('libs/testing/src/__fixtures__/leaves-children.fixture.ts', ['--wait']);
    const parent = await spawnProcess({ ...entry, readyWhen: { stdoutMatch: /spawned (\d+) (\d+)/ }, deadlineMs: 20_000 });
    const [, orphan, orphanChild] = parent.readyMatch ?? [];
    expect(processExists(Number(orphan))).toBe(true);
    expect(await parent.stop('SIGTERM', 5_000)).toEqual({ code: null, signal: 'SIGTERM' });
    await expectGone(Number(orphan));
    await expectGone(Number(orphanChild));
  });
});

describe('killProcessesMentioning', () => {
  it('kills the detached processes whose command line names the token, and no other', async () => {
    const token = `llmgw-test-${randomBytes(6).toString('hex')}`;
    const start = (arg: string): number => {
      // `--`: without it Node reads an argument like --model=... as an option of its own and exits.
      const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', '--', arg], { detached: true, stdio: 'ignore' });
      child.unref();
      return child.pid as number;
    };
    const named = [start(`/tmp/${token}/a`), start(`--model=/tmp/${token}/b`)];
    const other = start('/tmp/llmgw-test-someone-else');
    try {
      await waitFor(() => [...named, other].every((pid) => processExists(pid)));
      const killed = killProcessesMentioning(token);
      expect(killed.sort()).toEqual([...named].sort());
      for (const pid of named) await expectGone(pid);
      expect(processExists(other)).toBe(true);
      expect(() => killProcessesMentioning('/tmp')).toThrow(/too short/);
    } finally {
      process.kill(other, 'SIGKILL');
      for (const pid of named) if (processExists(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
