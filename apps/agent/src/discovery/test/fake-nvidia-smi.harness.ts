// Test-only: a fake `nvidia-smi` executable in a temp directory, to put first on PATH.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { asAgentQueryRow, h100QueryCsv } from './nvidia-smi.fixtures';

export type FakeNvidiaSmiVariant = 'rows' | 'rows-without-utilization' | 'exit-9' | 'hang';

/** The real driver-missing message nvidia-smi prints (with exit code 9). */
export const NO_DRIVER_MESSAGE =
  "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.";

/**
 * The rows the fake prints: the real H100 capture under load as GPU 0 and the idle capture as
 * GPU 1 (re-indexed, uuid ending in 1), in the agent's noheader,nounits field order.
 */
export function fakeRows(withUtilization: boolean): string[] {
  const load = asAgentQueryRow(h100QueryCsv('load'), { withUtilization });
  const idle = asAgentQueryRow(h100QueryCsv('idle'), { withUtilization }).replace(/^0, (GPU-0{8}-0{4}-0{4}-0{4}-0{11})0,/, (_m, prefix: string) => `1, ${prefix}1,`);
  return [load, idle];
}

export interface FakeNvidiaSmi {
  readonly dir: string;
  /** PATH with the fake first, then this process's PATH. */
  readonly path: string;
  /** Arguments of the last invocation, one per element (undefined if it never ran). */
  lastArgs(): string[] | undefined;
  /** Rewrites the script in place, so the next invocation behaves as `variant`. */
  become(variant: FakeNvidiaSmiVariant): void;
  remove(): void;
}

/** Writes an executable `nvidia-smi` (sh script) into a fresh temp directory. */
export function installFakeNvidiaSmi(variant: FakeNvidiaSmiVariant): FakeNvidiaSmi {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-fake-nvidia-smi-'));
  const argsFile = join(dir, 'args');
  const rowsFile = join(dir, 'rows.csv');
  const script = join(dir, 'nvidia-smi');
  const become = (v: FakeNvidiaSmiVariant) => {
    const body: Record<FakeNvidiaSmiVariant, string> = {
      rows: `cat '${rowsFile}'`,
      'rows-without-utilization': `cat '${rowsFile}'`,
      'exit-9': `echo "${NO_DRIVER_MESSAGE.replace(/"/g, '\\"')}"\nexit 9`,
      hang: 'exec sleep 30',
    };
    writeFileSync(rowsFile, fakeRows(v !== 'rows-without-utilization').join('\n') + '\n');
    writeFileSync(script, `#!/bin/sh\nprintf '%s\\n' "$@" > '${argsFile}'\n${body[v]}\n`);
    chmodSync(script, 0o755);
  };
  become(variant);
  return {
    dir,
    path: `${dir}${delimiter}${process.env.PATH ?? ''}`,
    lastArgs: () => {
      try {
        return readFileSync(argsFile, 'utf8').split('\n').slice(0, -1);
      } catch {
        return undefined;
      }
    },
    become,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
