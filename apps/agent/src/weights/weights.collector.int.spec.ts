// Reclaiming re-checks every path on the node itself: a table of hostile requests, each refused
// with its reason and nothing touched; legitimate cache entries (files and directories) removed.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CACHE_NAME_MAX_LENGTH } from '@llmgw/catalog';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SILENT_LOGGER } from '../runtime/agent.logger';
import { checkPath, WeightsCollector } from './weights.collector';

const HEX = '0123456789abcdef';
const n = (base: string): string => `llmgw-${HEX}-${base}`;

describe('WeightsCollector', () => {
  let root: string;
  let cacheDir: string;
  let outside: string;
  let inUse: Map<string, string>;
  let active: Set<string>;
  let collector: WeightsCollector;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'llmgw-collect-'));
    cacheDir = join(root, 'cache');
    outside = join(root, 'outside');
    mkdirSync(cacheDir);
    mkdirSync(outside);
    // What an operator owns, outside and inside the cache directory.
    writeFileSync(join(outside, 'precious.gguf'), 'a week of copying');
    mkdirSync(join(outside, 'precious-dir'));
    writeFileSync(join(outside, 'precious-dir', 'weights.bin'), 'more');
    writeFileSync(join(outside, n('same-name.gguf')), 'not in the cache dir');
    writeFileSync(join(cacheDir, 'operator-copied.gguf'), 'scp by hand');
    writeFileSync(join(cacheDir, `llmgw-${HEX.toUpperCase()}-upper.gguf`), 'looks close, is not a cache name');
    // Links with cache names, pointing out.
    symlinkSync(join(outside, 'precious.gguf'), join(cacheDir, n('file-link.gguf')));
    symlinkSync(join(outside, 'precious-dir'), join(cacheDir, n('dir-link')));
    symlinkSync(join(cacheDir, n('legit-file.gguf')), join(cacheDir, n('inner-link.gguf')));
    execFileSync('mkfifo', [join(cacheDir, n('a-fifo'))]);
    // Legitimate llmgw entries.
    writeFileSync(join(cacheDir, n('legit-file.gguf')), 'weights');
    mkdirSync(join(cacheDir, n('legit-repo')));
    writeFileSync(join(cacheDir, n('legit-repo'), 'config.json'), '{}');
    mkdirSync(join(cacheDir, n('legit-repo'), 'sub'));
    // A link inside a directory being collected is removed, its target kept.
    symlinkSync(join(outside, 'precious.gguf'), join(cacheDir, n('legit-repo'), 'sub', 'link-out'));
    writeFileSync(join(cacheDir, n('in-use.gguf')), 'serving');
    mkdirSync(join(cacheDir, n('in-use-repo')));
    writeFileSync(join(cacheDir, n('downloading.gguf.partial')), 'half');

    inUse = new Map([
      [join(cacheDir, n('in-use.gguf')), 'r-serving'],
      [join(cacheDir, n('in-use-repo'), 'model.safetensors'), 'r-repo'],
    ]);
    active = new Set([n('downloading.gguf'), n('downloading.gguf.partial')]);
    collector = new WeightsCollector({ cacheDir, inUse: () => inUse, active: () => active, logger: SILENT_LOGGER });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const hostile: [string, () => string, RegExp][] = [
    ['a relative traversal', () => '../outside/precious.gguf', /traversal/],
    ['a traversal hidden after a cache name', () => `${n('legit-file.gguf')}/../../outside/precious.gguf`, /traversal/],
    ['an absolute path elsewhere', () => join(outside, 'precious.gguf'), /outside the cache directory/],
    ['an absolute path elsewhere carrying a cache name', () => join(outside, n('same-name.gguf')), /outside the cache directory/],
    ['an absolute path escaping the cache directory with ..', () => `${cacheDir}/../outside/precious.gguf`, /traversal/],
    ['/etc/passwd', () => '/etc/passwd', /outside the cache directory/],
    ['a file an operator copied into the cache directory', () => 'operator-copied.gguf', /not a cache name/],
    ['the same, as an absolute path', () => join(cacheDir, 'operator-copied.gguf'), /not a cache name/],
    ['a name that looks like a cache name but is not (uppercase hash)', () => `llmgw-${HEX.toUpperCase()}-upper.gguf`, /not a cache name/],
    ['a cache name that is a symlink to a file outside', () => n('file-link.gguf'), /symbolic link/],
    ['a cache name that is a symlink to a directory outside', () => n('dir-link'), /symbolic link/],
    ['a cache name that is a symlink inside the cache', () => n('inner-link.gguf'), /symbolic link/],
    ['a path through a directory symlink', () => join(cacheDir, n('dir-link'), 'weights.bin'), /outside the cache directory|not directly inside/],
    ['a NUL byte', () => `${n('legit-file.gguf')}\0.txt`, /NUL byte/],
    ['control characters', () => `${n('legit-file.gguf')}\n`, /control characters/],
    ['a very long name', () => n('x'.repeat(300)), new RegExp(`at most ${CACHE_NAME_MAX_LENGTH}`)],
    ['a very long path', () => `/${'a/'.repeat(3000)}${n('legit-file.gguf')}`, /characters long/],
    ['an empty path', () => '', /empty/],
    ['the cache directory itself', () => '.', /not an entry|not a cache name/],
    ['the parent', () => '..', /traversal/],
    ['a relative path with a directory', () => `./${n('legit-file.gguf')}`, /relative path/],
    ['a doubled slash', () => `${cacheDir}//${n('legit-file.gguf')}`, /normalised/],
    ['a file inside a cache entry', () => join(cacheDir, n('legit-repo'), 'config.json'), /outside the cache directory|not directly inside/],
    ['a FIFO carrying a cache name', () => n('a-fifo'), /not a regular file or directory/],
    ['weights a running replica loads', () => n('in-use.gguf'), /in use by replica r-serving/],
    ['a repository a running replica loads from', () => join(cacheDir, n('in-use-repo')), /in use by replica r-repo/],
    ['a download in progress', () => n('downloading.gguf.partial'), /being downloaded/],
  ];

  it.each(hostile)('refuses %s, with the reason, touching nothing', async (_what, path, reason) => {
    const snapshot = listing(root);
    const [result] = await collector.collect([path()]);
    expect(result.outcome).toBe('refused');
    expect(result.reason).toMatch(reason);
    expect(result.path).toBe(path());
    expect(listing(root)).toEqual(snapshot);
  });

  it('removes legitimate entries — a file by name, a directory by absolute path — and reports what is not there', async () => {
    const results = await collector.collect([n('legit-file.gguf'), join(cacheDir, n('legit-repo')), n('never-fetched.gguf'), '../outside/precious.gguf']);
    expect(results.map((r) => [r.outcome, r.reason])).toEqual([
      ['removed', ''],
      ['removed', ''],
      ['not-found', 'nothing there'],
      ['refused', expect.stringMatching(/traversal/)],
    ]);
    expect(existsSync(join(cacheDir, n('legit-file.gguf')))).toBe(false);
    expect(existsSync(join(cacheDir, n('legit-repo')))).toBe(false);
    // The link inside the removed directory went; what it pointed at did not.
    expect(readFileSync(join(outside, 'precious.gguf'), 'utf8')).toBe('a week of copying');
    // Nothing else moved, and no half-removed leftovers remain.
    expect(existsSync(join(cacheDir, 'operator-copied.gguf'))).toBe(true);
    expect(existsSync(join(cacheDir, n('file-link.gguf')))).toBe(true);
    expect(listing(cacheDir).filter((p) => p.includes('.llmgw-removing-'))).toEqual([]);
  });

  it('weights stop being "in use" once their replica is gone', async () => {
    expect((await collector.collect([n('in-use.gguf')]))[0].outcome).toBe('refused');
    inUse.delete(join(cacheDir, n('in-use.gguf')));
    expect((await collector.collect([n('in-use.gguf')]))[0].outcome).toBe('removed');
  });

  it('accepts the resolved form of a cache directory reached through a link', async () => {
    const linked = join(root, 'cache-link');
    symlinkSync(cacheDir, linked);
    const viaLink = new WeightsCollector({ cacheDir: linked, inUse: () => new Map(), active: () => new Set(), logger: SILENT_LOGGER });
    const results = await viaLink.collect([join(linked, n('legit-file.gguf')), join(cacheDir, n('legit-repo'))]);
    expect(results.map((r) => r.outcome)).toEqual(['removed', 'removed']);
  });

  it('checkPath needs no file system and refuses non-strings', () => {
    expect(checkPath(42, ['/c'])).toEqual({ ok: false, reason: 'empty path' });
    expect(checkPath(n('a.gguf'), ['/c'])).toEqual({ ok: true, name: n('a.gguf') });
    expect(checkPath(`/c/${n('a.gguf')}`, ['/c'])).toEqual({ ok: true, name: n('a.gguf') });
  });
});

/** Every path under `dir` with its content (files) or link target, for before/after comparison. */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isSymbolicLink()) out.push(`${p} -> ${readlinkSync(p)}`);
      else if (entry.isDirectory()) {
        out.push(`${p}/`);
        walk(p);
      } else if (entry.isFile()) out.push(`${p}: ${readFileSync(p, 'utf8')}`);
      else out.push(`${p} (special)`);
    }
  };
  walk(dir);
  return out.sort();
}
