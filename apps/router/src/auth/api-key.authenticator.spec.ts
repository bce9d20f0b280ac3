import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ApiKeyAuthenticator, keyAllows, parseApiKeys } from './api-key.authenticator';

describe('ApiKeyAuthenticator', () => {
  const auth = new ApiKeyAuthenticator([
    { name: 'team-a', key: 'sk-aaaaaaaaaaaaaaaa' },
    { name: 'team-b', key: 'sk-bbbbbbbbbbbbbbbb' },
  ]);

  it.each([
    ['Bearer sk-aaaaaaaaaaaaaaaa', 'team-a'],
    ['bearer   sk-bbbbbbbbbbbbbbbb ', 'team-b'],
    ['Bearer sk-aaaaaaaaaaaaaaa', undefined],
    ['sk-aaaaaaaaaaaaaaaa', undefined],
    ['Basic sk-aaaaaaaaaaaaaaaa', undefined],
    ['Bearer ', undefined],
    [undefined, undefined],
  ])('%s → %s', (header, name) => {
    expect(auth.authenticate(header)).toBe(name);
  });
});

describe('parseApiKeys', () => {
  it('reads YAML and JSON, with or without the keys: wrapper', () => {
    expect(parseApiKeys('keys:\n  - { name: a, key: sk-0123456789abcdef }\n', 'f')).toEqual([{ name: 'a', key: 'sk-0123456789abcdef' }]);
    expect(parseApiKeys('[{"name":"a","key":"sk-0123456789abcdef"}]', 'f')).toEqual([{ name: 'a', key: 'sk-0123456789abcdef' }]);
  });

  it('lists every problem with its path', () => {
    const text = 'keys:\n  - { name: a, key: short }\n  - { name: a, key: sk-0123456789abcdef, role: admin }\n  - { key: sk-0123456789abcdef }\n  - 42\n';
    expect(() => parseApiKeys(text, '/etc/keys.yaml')).toThrow(
      [
        'API keys file /etc/keys.yaml: 6 problem(s):',
        '  keys[0].key: expected at least 16 characters without whitespace',
        '  keys[1]: unknown field(s) role',
        "  keys[1].name: 'a' is used twice",
        '  keys[2].name: expected 1-64 of A-Z a-z 0-9 _ . : -',
        '  keys[2].key: the same key is listed twice',
        '  keys[3]: expected { name, key }',
      ].join('\n'),
    );
  });

  it('refuses an empty list rather than silently running open', () => {
    expect(() => parseApiKeys('keys: []', 'f')).toThrow(/no keys listed/);
    expect(() => parseApiKeys('{{', 'f')).toThrow(/not valid YAML/);
  });
});

describe('ApiKeyAuthenticator with keys the controller manages', () => {
  const hash = (s: string) => createHash('sha256').update(s).digest('hex');
  let now = 1_000;
  const auth = new ApiKeyAuthenticator([], { now: () => now });

  it('checks nothing until the controller manages keys, then keeps checking when none is left', () => {
    expect(auth.enforcing).toBe(false);
    auth.replaceManaged([{ secretHash: hash('llmgw-search-secret-0123'), name: 'search', models: ['llama*'], limits: { requestsPerMinute: 5 }, expiresAt: 2_000 }]);
    expect(auth.enforcing).toBe(true);
    expect(auth.check('Bearer llmgw-search-secret-0123')).toEqual({ ok: true, key: { name: 'search', models: ['llama*'], limits: { requestsPerMinute: 5 }, expiresAt: 2_000 } });
    expect(auth.check('Bearer llmgw-other-secret-01234')).toEqual({ ok: false, reason: 'unknown' });
    expect(auth.check(undefined)).toEqual({ ok: false, reason: 'missing' });
    now = 2_000;
    expect(auth.check('Bearer llmgw-search-secret-0123')).toEqual({ ok: false, reason: 'expired' });
    auth.replaceManaged([]);
    expect(auth.enforcing).toBe(true);
    expect(auth.size).toBe(0);
  });

  it("lets a key use exactly the models its list names, by name or alias", () => {
    const key = { name: 'k', models: ['llama*', 'qwen'], limits: {} };
    expect(keyAllows(key, 'llama-3-8b', 'llama-3-8b')).toBe(true);
    expect(keyAllows(key, 'q', 'qwen')).toBe(true);
    expect(keyAllows(key, 'mistral', 'mistral')).toBe(false);
    expect(keyAllows({ name: 'file', limits: {} }, 'anything', 'anything')).toBe(true);
  });
});

describe('parseApiKeys with models and limits', () => {
  it('reads each key\'s models and limits, and lists every problem of them with its path', () => {
    const keys = parseApiKeys('keys:\n  - { name: a, key: sk-0123456789abcdef, models: [llama, "qwen*"], limits: { requestsPerMinute: 60, concurrentRequests: 2 } }\n  - { name: b, key: sk-fedcba9876543210 }\n', 'f');
    expect(keys).toEqual([
      { name: 'a', key: 'sk-0123456789abcdef', models: ['llama', 'qwen*'], limits: { requestsPerMinute: 60, concurrentRequests: 2 } },
      { name: 'b', key: 'sk-fedcba9876543210' },
    ]);
    const auth = new ApiKeyAuthenticator(keys);
    expect(auth.check('Bearer sk-0123456789abcdef')).toEqual({ ok: true, key: { name: 'a', models: ['llama', 'qwen*'], limits: { requestsPerMinute: 60, concurrentRequests: 2 } } });
    expect(() => parseApiKeys('keys:\n  - { name: a, key: sk-0123456789abcdef, models: [], limits: { requestsPerMinute: -1, burst: 3 } }\n', 'f')).toThrow(
      /keys\[0\]\.limits\.burst: unknown field[\s\S]*keys\[0\]\.limits\.requestsPerMinute: expected a whole number[\s\S]*keys\[0\]\.models: expected a list/,
    );
  });
});
