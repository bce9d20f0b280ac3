import { describe, expect, it } from 'vitest';
import { ApiKeyAuthenticator, parseApiKeys } from './api-key.authenticator';

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
