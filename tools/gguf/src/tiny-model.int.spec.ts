import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildTinyModel } from './tiny-model';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'llmgw-gguf-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('tiny GGUF model', () => {
  it('is byte-for-byte deterministic for a seed, and differs across seeds', () => {
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(sha(buildTinyModel())).toBe(sha(buildTinyModel()));
    expect(sha(buildTinyModel({ seed: 7 }))).not.toBe(sha(buildTinyModel()));
  });

  it('writes a GGUF v3 header with every tensor of a 2-layer llama', () => {
    const b = buildTinyModel();
    expect(b.subarray(0, 4).toString('ascii')).toBe('GGUF');
    expect(b.readUInt32LE(4)).toBe(3);
    expect(Number(b.readBigUInt64LE(8))).toBe(2 + 2 * 9); // embeddings, output norm, 9 per layer
    expect(b.length).toBeLessThan(600_000);
  });

  it('loads and generates in the real llama.cpp (node-llama-cpp, CPU, one thread)', async () => {
    const file = join(dir, 'tiny.gguf');
    writeFileSync(file, buildTinyModel());
    const { stdout } = await run(process.execPath, [resolve(__dirname, 'load-check.mjs'), file, '8'], { timeout: 60_000 });
    expect(JSON.parse(stdout.trim())).toMatchObject({ loaded: true, tokens: 8 });
  }, 90_000);

  it('a truncated file fails in its own process without taking the caller down', async () => {
    const file = join(dir, 'broken.gguf');
    writeFileSync(file, buildTinyModel().subarray(0, 5_000));
    await expect(run(process.execPath, [resolve(__dirname, 'load-check.mjs'), file], { timeout: 60_000 })).rejects.toMatchObject({
      code: expect.anything(),
    });
  }, 90_000);
});
