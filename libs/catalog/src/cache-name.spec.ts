import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CACHE_NAME_MAX_LENGTH, cacheName, isCacheName } from './cache-name';

const hash16 = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

describe('cacheName', () => {
  it.each([
    ['hf://meta-llama/Llama-3.1-8B-Instruct@main', 'Llama-3.1-8B-Instruct'],
    ['hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf@main', 'qwen2.5-0.5b-instruct-q4_k_m.gguf'],
    ['hf://org/repo/sub/dir/model.gguf@refs/pr/1', 'model.gguf'],
    ['https://example.com/models/qwen.Q4_K_M.gguf?download=true#x', 'qwen.Q4_K_M.gguf'],
    ['https://example.com/a/my%20model (v2).gguf', 'my_20model__v2_.gguf'],
    ['http://example.com/', 'weights'],
    ['https://example.com/a/..hidden...gguf', 'hidden.gguf'],
    ['https://example.com/a/' + 'x'.repeat(100) + '.gguf', 'x'.repeat(59) + '.gguf'],
  ])('%s → llmgw-<sha256 prefix>-%s', (source, basename) => {
    expect(cacheName(source)).toBe(`llmgw-${hash16(source)}-${basename}`);
    expect(isCacheName(cacheName(source))).toBe(true);
  });

  it('gives file:// sources no cache name: they are used in place', () => {
    expect(cacheName('file:///srv/models/x.gguf')).toBeUndefined();
  });

  it('is deterministic and different for different sources with the same basename', () => {
    const a = cacheName('https://a.example/m.gguf');
    expect(cacheName('https://a.example/m.gguf')).toBe(a);
    expect(cacheName('https://b.example/m.gguf')).not.toBe(a);
    expect(cacheName('hf://org/repo@v1')).not.toBe(cacheName('hf://org/repo@v2'));
  });

  const httpSource = fc.webUrl({ withQueryParameters: true, withFragments: true });
  const segment = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,30}$/);
  const hfSource = fc
    .tuple(segment, segment, fc.array(fc.stringMatching(/^[A-Za-z0-9._+=-]{1,40}$/), { maxLength: 3 }), fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,40}$/))
    .map(([org, repo, file, rev]) => `hf://${org}/${repo}${file.map((f) => `/${f}`).join('')}@${rev}`);
  const anyText = fc.string({ unit: 'binary', maxLength: 300 }).map((s) => `https://h/${s}`);

  it('is deterministic and always a valid cache name for http(s) and hf sources (property)', () => {
    fc.assert(
      fc.property(fc.oneof(httpSource, hfSource, anyText), (source) => {
        const name = cacheName(source);
        expect(name).toBe(cacheName(source));
        expect(isCacheName(name)).toBe(true);
        expect(name!.length).toBeLessThanOrEqual(CACHE_NAME_MAX_LENGTH);
        expect(name!.startsWith(`llmgw-${hash16(source)}-`)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('isCacheName', () => {
  const ok = 'llmgw-0123456789abcdef-model.gguf';
  it('accepts what cacheName produces', () => {
    expect(isCacheName(ok)).toBe(true);
    expect(isCacheName('llmgw-0123456789abcdef-weights')).toBe(true);
  });
  it.each([
    ['no prefix', '0123456789abcdef-model.gguf'],
    ['other prefix', 'llmgx-0123456789abcdef-model.gguf'],
    ['upper-case hex', 'llmgw-0123456789ABCDEF-model.gguf'],
    ['15 hex digits', 'llmgw-0123456789abcde-model.gguf'],
    ['17 hex digits', 'llmgw-0123456789abcdef0-model.gguf'],
    ['no basename', 'llmgw-0123456789abcdef-'],
    ['slash', 'llmgw-0123456789abcdef-a/b'],
    ['traversal', 'llmgw-0123456789abcdef-/../etc'],
    ['dot-dot inside', 'llmgw-0123456789abcdef-a..b'],
    ['dot-dot basename', 'llmgw-0123456789abcdef-..'],
    ['hidden basename', 'llmgw-0123456789abcdef-.x'],
    ['space', 'llmgw-0123456789abcdef-a b'],
    ['backslash', 'llmgw-0123456789abcdef-a\\b'],
    ['newline', 'llmgw-0123456789abcdef-a\n'],
    ['too long', 'llmgw-0123456789abcdef-' + 'a'.repeat(65)],
    ['path with the name', '/var/cache/llmgw/llmgw-0123456789abcdef-model.gguf'],
    ['empty', ''],
  ])('refuses %s', (_n, name) => {
    expect(isCacheName(name)).toBe(false);
  });
  it('refuses non-strings', () => {
    expect(isCacheName(undefined)).toBe(false);
    expect(isCacheName(42)).toBe(false);
  });
});
