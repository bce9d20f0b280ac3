import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DomainError } from '@llmgw/domain';
import { HostCollector } from './host.collector';

describe('HostCollector (real filesystem)', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'llmgw-cache-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('reports CPU cores and memory of this machine', () => {
    const host = new HostCollector(root).host();
    expect(host.cpuCores).toBeGreaterThanOrEqual(1);
    expect(host.cpuCores).toBeLessThanOrEqual(cpus().length);
    expect(host.memoryBytes).toBe(totalmem());
  });

  it('statfs numbers are positive bytes, free ≤ total', async () => {
    const cache = await new HostCollector(root).cache();
    expect(cache.totalBytes).toBeGreaterThan(0);
    expect(cache.freeBytes).toBeGreaterThan(0);
    expect(cache.freeBytes).toBeLessThanOrEqual(cache.totalBytes);
    expect(Number.isInteger(cache.totalBytes)).toBe(true);
  });

  it('lists top-level entries sorted: file sizes, directories summed, newest mtime, links not followed', async () => {
    writeFileSync(join(root, 'b-file.gguf'), Buffer.alloc(1000));
    utimesSync(join(root, 'b-file.gguf'), 1_700_000_000, 1_700_000_000);
    mkdirSync(join(root, 'a-dir', 'nested'), { recursive: true });
    writeFileSync(join(root, 'a-dir', 'x.safetensors'), Buffer.alloc(300));
    writeFileSync(join(root, 'a-dir', 'nested', 'y.json'), Buffer.alloc(45));
    const outside = mkdtempSync(join(tmpdir(), 'llmgw-outside-'));
    writeFileSync(join(outside, 'big'), Buffer.alloc(100_000));
    symlinkSync(outside, join(root, 'c-link'));
    try {
      for (const p of ['a-dir/nested/y.json', 'a-dir/nested', 'a-dir/x.safetensors', 'a-dir']) utimesSync(join(root, p), 1_600_000_000, 1_600_000_000);
      utimesSync(join(root, 'a-dir', 'nested', 'y.json'), 1_650_000_000, 1_650_000_000);
      const cache = await new HostCollector(root).cache();
      expect(cache.dir).toBe(root);
      expect(cache.entries.map((e) => e.name)).toEqual(['a-dir', 'b-file.gguf', 'c-link']);
      expect(cache.entries[0]).toEqual({ name: 'a-dir', sizeBytes: 345, modifiedAt: 1_650_000_000_000 });
      expect(cache.entries[1]).toEqual({ name: 'b-file.gguf', sizeBytes: 1000, modifiedAt: 1_700_000_000_000 });
      expect(cache.entries[2].sizeBytes).toBeLessThan(1000); // the link itself, not the 100 kB it points to
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('a cache directory that does not exist yet: no entries, space of the filesystem it will live on', async () => {
    const cache = await new HostCollector(join(root, 'not', 'yet')).cache();
    expect(cache.entries).toEqual([]);
    expect(cache.totalBytes).toBeGreaterThan(0);
    expect(cache.dir).toBe(join(root, 'not', 'yet'));
  });

  it('resolves a relative cache directory against the working directory', () => {
    expect(new HostCollector(relative(process.cwd(), root)).cacheDir).toBe(root);
  });

  it('a cache path that is a file is a clear error naming it', async () => {
    writeFileSync(join(root, 'file'), 'x');
    const error = await new HostCollector(join(root, 'file')).cache().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DomainError);
    expect((error as Error).message).toContain(`cache directory ${join(root, 'file')} cannot be read`);
  });
});
