import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CommandError, ExecFileCommandRunner } from './exec-file.runner';
import { NVIDIA_SMI_QUERY_ARGS } from './nvidia-smi.parser';
import { NO_DRIVER_MESSAGE, fakeRows, installFakeNvidiaSmi, type FakeNvidiaSmi } from './test/fake-nvidia-smi.harness';

describe('ExecFileCommandRunner (real processes, fake nvidia-smi first on PATH)', () => {
  let fake: FakeNvidiaSmi | undefined;
  afterEach(() => fake?.remove());

  it('finds the program on PATH, passes each argument as is (no shell) and returns stdout', async () => {
    fake = installFakeNvidiaSmi('rows');
    const runner = new ExecFileCommandRunner({ ...process.env, PATH: fake.path });
    const out = await runner.run('nvidia-smi', [...NVIDIA_SMI_QUERY_ARGS, 'a b; echo $HOME'], { timeoutMs: 10_000 });
    expect(out).toBe(fakeRows(true).join('\n') + '\n');
    expect(fake.lastArgs()).toEqual([...NVIDIA_SMI_QUERY_ARGS, 'a b; echo $HOME']);
  });

  it('a non-zero exit rejects with the code and the first line the program printed', async () => {
    fake = installFakeNvidiaSmi('exit-9');
    const runner = new ExecFileCommandRunner({ ...process.env, PATH: fake.path });
    const error = await runner.run('nvidia-smi', [], { timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandError);
    expect(error).toMatchObject({ failure: 'exit', exitCode: 9 });
    expect((error as Error).message).toBe(`nvidia-smi: exited with code 9: ${NO_DRIVER_MESSAGE}`);
  });

  it('a program missing from PATH rejects as not-found', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'llmgw-empty-path-'));
    try {
      const error = await new ExecFileCommandRunner({ PATH: empty }).run('nvidia-smi', [], { timeoutMs: 10_000 }).catch((e: unknown) => e);
      expect(error).toMatchObject({ failure: 'not-found', message: 'nvidia-smi: not found on PATH' });
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('a program that does not answer in time is killed and rejects as timeout', async () => {
    fake = installFakeNvidiaSmi('hang');
    const started = performance.now();
    const error = await new ExecFileCommandRunner({ ...process.env, PATH: fake.path }).run('nvidia-smi', [], { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ failure: 'timeout', message: 'nvidia-smi: no answer within 300 ms' });
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
