import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, redactUrlPassword } from './config.error';
import { acceptedVariables, fileVariables, loadConfig, loadConfigOrExit } from './config.loader';
import { env, parseBoolean, parseDuration, parseHost, parseList, parsePort, parseToken, parseUrl } from './env-var.schema';
import { DATABASE_ENV, SHARED_ENV, sharedConfig } from './shared.config';

const schema = z
  .object({
    ...SHARED_ENV,
    ...DATABASE_ENV,
    LLMGW_TEST_PORT: env.port({ default: 8080 }),
    LLMGW_TEST_TIMEOUT: env.duration({ default: '5s' }),
    LLMGW_TEST_ENABLED: env.boolean({ default: false }),
    LLMGW_TEST_PEERS: env.list(parseUrl(['http:', 'https:']), { default: [] }),
    LLMGW_TEST_REQUIRED: env.string(),
    LLMGW_TEST_API_TOKEN: env.string({ optional: true }),
  })
  .transform((e) => ({
    ...sharedConfig(e),
    databaseUrl: e.LLMGW_DATABASE_URL,
    port: e.LLMGW_TEST_PORT,
    timeoutMs: e.LLMGW_TEST_TIMEOUT,
    enabled: e.LLMGW_TEST_ENABLED,
    peers: e.LLMGW_TEST_PEERS,
    required: e.LLMGW_TEST_REQUIRED,
  }));

function problemsOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies defaults and returns a deep-frozen typed object', () => {
    const config = loadConfig(schema, { LLMGW_TEST_REQUIRED: 'x', PATH: '/usr/bin' });
    expect(config).toEqual({
      logLevel: 'info',
      dataDir: resolve('.llmgw'),
      host: '127.0.0.1',
      shutdownTimeoutMs: 10_000,
      databaseUrl: undefined,
      port: 8080,
      timeoutMs: 5_000,
      enabled: false,
      peers: [],
      required: 'x',
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.peers)).toBe(true);
    expect(() => {
      (config as { port: number }).port = 1;
    }).toThrow(TypeError);
  });

  it('reads given values', () => {
    const config = loadConfig(schema, {
      LLMGW_LOG_LEVEL: 'debug',
      LLMGW_DATA_DIR: '/var/lib/llmgw',
      LLMGW_HOST: '::1',
      LLMGW_SHUTDOWN_TIMEOUT: '2m',
      LLMGW_DATABASE_URL: 'postgres://llmgw:pw@db:5432/llmgw',
      LLMGW_TEST_PORT: '0',
      LLMGW_TEST_TIMEOUT: '1500',
      LLMGW_TEST_ENABLED: '1',
      LLMGW_TEST_PEERS: 'http://a:1, https://b',
      LLMGW_TEST_REQUIRED: 'y',
    });
    expect(config).toMatchObject({
      logLevel: 'debug',
      dataDir: '/var/lib/llmgw',
      host: '::1',
      shutdownTimeoutMs: 120_000,
      databaseUrl: 'postgres://llmgw:pw@db:5432/llmgw',
      port: 0,
      timeoutMs: 1_500,
      enabled: true,
      peers: ['http://a:1', 'https://b'],
    });
  });

  it('lists every bad variable with its value and reason in one error', () => {
    const error = problemsOf(() =>
      loadConfig(schema, {
        LLMGW_LOG_LEVEL: 'loud',
        LLMGW_HOST: 'http://0.0.0.0',
        LLMGW_SHUTDOWN_TIMEOUT: '5 s',
        LLMGW_DATABASE_URL: 'mysql://u:hunter2@db/x',
        LLMGW_TEST_PORT: 'abc',
        LLMGW_TEST_TIMEOUT: '-1s',
        LLMGW_TEST_ENABLED: 'yes',
        LLMGW_TEST_PEERS: 'http://a,,http://b',
        LLMGW_TEST_API_TOKEN: '',
      }),
    );
    expect(error.problems.map((p) => p.variable).sort()).toEqual(
      [
        'LLMGW_LOG_LEVEL',
        'LLMGW_HOST',
        'LLMGW_SHUTDOWN_TIMEOUT',
        'LLMGW_DATABASE_URL',
        'LLMGW_TEST_PORT',
        'LLMGW_TEST_TIMEOUT',
        'LLMGW_TEST_ENABLED',
        'LLMGW_TEST_PEERS',
        'LLMGW_TEST_REQUIRED',
      ].sort(),
    );
    const lines = error.message.split('\n');
    expect(lines[0]).toBe('invalid configuration (9 problems):');
    expect(lines).toContain('  LLMGW_LOG_LEVEL="loud": expected one of fatal, error, warn, info, debug, trace, silent');
    expect(lines).toContain('  LLMGW_TEST_PORT="abc": expected a port number 0..65535');
    expect(lines).toContain('  LLMGW_TEST_ENABLED="yes": expected true, false, 1 or 0');
    expect(lines).toContain('  LLMGW_TEST_REQUIRED (unset): is required');
    expect(lines).toContain('  LLMGW_TEST_PEERS="http://a,,http://b": item 2 of the comma-separated list is empty');
    // A password in a URL never reaches the message.
    expect(lines).toContain(
      '  LLMGW_DATABASE_URL="mysql://u:***@db/x": expected a URL starting postgres: or postgresql: or sqlite:',
    );
    expect(error.message).not.toContain('hunter2');
  });

  it('redacts values of variables whose names say they are secret', () => {
    const secretSchema = z.object({ LLMGW_ROUTER_API_KEY: env.integer(0, 10) });
    const error = problemsOf(() => loadConfig(secretSchema, { LLMGW_ROUTER_API_KEY: 'sk-live-123' }));
    expect(error.message).toContain('LLMGW_ROUTER_API_KEY=<redacted>: expected a whole number between 0 and 10');
    expect(error.message).not.toContain('sk-live');
  });

  it('loadConfigOrExit prints every problem on stderr and exits 1', () => {
    let printed = '';
    let code: number | undefined;
    const exit = ((c: number) => {
      code = c;
      throw new Error('exited');
    }) as (code: number) => never;
    expect(() =>
      loadConfigOrExit('llmgw-test', schema, {
        env: { LLMGW_TEST_PORT: '70000' },
        stderr: (text) => (printed += text),
        exit,
      }),
    ).toThrow('exited');
    expect(code).toBe(1);
    expect(printed).toBe(
      'llmgw-test: invalid configuration (2 problems):\n' +
        '  LLMGW_TEST_PORT="70000": expected a port number 0..65535\n' +
        '  LLMGW_TEST_REQUIRED (unset): is required\n',
    );
  });
});

describe('variable parsers', () => {
  it.each(['0123456789abcdef', 'a'.repeat(512), 'Zm9vYmFyYmF6cXV4-_~!0123'])('token %j is taken', (raw) => expect(parseToken(raw)).toEqual({ ok: true, value: raw }));

  it.each([
    ['change-me', /16 to 512 characters/],
    ['0123456789abcde', /16 to 512 characters/],
    ['a'.repeat(513), /16 to 512 characters/],
    ['has a space 0123456789', /without whitespace/],
    ['change-me-join-token-0123', /placeholder \(contains "change-me"\)/],
    ['ChangeMe0123456789abcdef', /placeholder \(contains "changeme"\)/],
    ['my-example-token-0123456', /placeholder \(contains "example"\)/],
    ['xxxxxxxxxxxxxxxxxxxxxxxx', /placeholder/],
  ])('token %j is refused', (raw, reason) => {
    const parsed = parseToken(raw);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? '' : parsed.reason).toMatch(reason);
  });

  it.each([
    ['0', 0],
    ['8080', 8080],
    ['65535', 65_535],
  ])('port %s → %d', (raw, value) => expect(parsePort(raw)).toEqual({ ok: true, value }));

  it.each(['65536', '-1', '80.5', ' 80', '0x50', '1e3', '123456'])('port %j is refused', (raw) =>
    expect(parsePort(raw).ok).toBe(false),
  );

  it.each([
    ['500ms', 500],
    ['5s', 5_000],
    ['2m', 120_000],
    ['1h', 3_600_000],
    ['1500', 1_500],
    ['0', 0],
  ])('duration %s → %d ms', (raw, value) => expect(parseDuration(raw)).toEqual({ ok: true, value }));

  it.each(['5 s', '1.5s', '-5s', '5d', 's', '5S', ''])('duration %j is refused', (raw) =>
    expect(parseDuration(raw).ok).toBe(false),
  );

  it.each([
    ['true', true],
    ['1', true],
    ['false', false],
    ['0', false],
  ])('boolean %s → %s', (raw, value) => expect(parseBoolean(raw)).toEqual({ ok: true, value }));

  it.each(['yes', 'no', 'TRUE', 'on', '2', ' true'])('boolean %j is refused', (raw) =>
    expect(parseBoolean(raw).ok).toBe(false),
  );

  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['0.0.0.0', '0.0.0.0'],
    ['::', '::'],
    ['[::1]', '::1'],
    ['node-1.example.com', 'node-1.example.com'],
  ])('host %s → %s', (raw, value) => expect(parseHost(raw)).toEqual({ ok: true, value }));

  it.each(['http://x', 'x:80', 'a b', 'x/y', '-x'])('host %j is refused', (raw) => expect(parseHost(raw).ok).toBe(false));

  it('lists trim items and parse each one', () => {
    expect(parseList(parsePort)('1, 2 ,3')).toEqual({ ok: true, value: [1, 2, 3] });
    expect(parseList(parsePort)('1,x')).toEqual({
      ok: false,
      reason: 'item 2 ("x"): expected a port number 0..65535',
    });
  });

  it('an invalid default duration is a programming error at definition time', () => {
    expect(() => env.duration({ default: '5 minutes' })).toThrow(/invalid default duration "5 minutes"/);
  });

  it('empty text counts as unset', () => {
    const s = z.object({ A: env.port({ default: 1 }), B: env.port({ optional: true }) });
    expect(loadConfig(s, { A: '', B: '' })).toEqual({ A: 1, B: undefined });
  });

  it('redactUrlPassword hides only the password', () => {
    expect(redactUrlPassword('postgres://user:secret@db:5432/x')).toBe('postgres://user:***@db:5432/x');
    expect(redactUrlPassword('postgres://db:5432/x')).toBe('postgres://db:5432/x');
    expect(redactUrlPassword('not a url: a@b')).toBe('not a url: a@b');
  });
});

describe('secrets from files (<NAME>_FILE)', () => {
  const tokenSchema = z
    .object({
      LLMGW_TEST_JOIN_TOKEN: env.token({ optional: true }),
      LLMGW_TEST_ROUTER_TOKEN: env.token(),
      LLMGW_TEST_NAME: env.string({ optional: true }),
    })
    .transform((e) => ({ join: e.LLMGW_TEST_JOIN_TOKEN, router: e.LLMGW_TEST_ROUTER_TOKEN }));
  const secret = 'b7c1f0e9d2a34c5b8e6f7a9d0c1b2e3f';
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'llmgw-config-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string): string => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  };

  it('accepts every *_TOKEN variable of the schema as <NAME>_FILE, and only those', () => {
    expect(fileVariables(tokenSchema)).toEqual(['LLMGW_TEST_JOIN_TOKEN', 'LLMGW_TEST_ROUTER_TOKEN']);
    expect([...acceptedVariables(tokenSchema)].sort()).toEqual(
      ['LLMGW_TEST_JOIN_TOKEN', 'LLMGW_TEST_JOIN_TOKEN_FILE', 'LLMGW_TEST_NAME', 'LLMGW_TEST_ROUTER_TOKEN', 'LLMGW_TEST_ROUTER_TOKEN_FILE'].sort(),
    );
  });

  it.each([
    ['a trailing newline', `${secret}\n`],
    ['a trailing CRLF', `${secret}\r\n`],
    ['no newline', secret],
  ])('reads the value from the file, with %s dropped', (_, content) => {
    const config = loadConfig(tokenSchema, { LLMGW_TEST_ROUTER_TOKEN_FILE: file('router.token', content), LLMGW_TEST_JOIN_TOKEN: `${secret}00` });
    expect(config).toEqual({ router: secret, join: `${secret}00` });
  });

  it('drops only one trailing newline: a second one is part of the value and refused like any bad token', () => {
    const path = file('two-newlines.token', `${secret}\n\n`);
    const error = problemsOf(() => loadConfig(tokenSchema, { LLMGW_TEST_ROUTER_TOKEN_FILE: path }));
    expect(error.problems).toEqual([
      { variable: 'LLMGW_TEST_ROUTER_TOKEN_FILE', shown: JSON.stringify(path), reason: "the file's content: expected visible ASCII characters without whitespace" },
    ]);
    expect(error.message).not.toContain(secret);
  });

  it('refuses both forms, an unreadable file and an empty file, naming the _FILE variable and never the value', () => {
    const missing = join(dir, 'missing.token');
    const error = problemsOf(() =>
      loadConfig(tokenSchema, {
        LLMGW_TEST_ROUTER_TOKEN: secret,
        LLMGW_TEST_ROUTER_TOKEN_FILE: file('both.token', secret),
        LLMGW_TEST_JOIN_TOKEN_FILE: missing,
      }),
    );
    expect(error.problems).toEqual([
      { variable: 'LLMGW_TEST_JOIN_TOKEN_FILE', shown: JSON.stringify(missing), reason: 'cannot read the file (ENOENT)' },
      { variable: 'LLMGW_TEST_ROUTER_TOKEN_FILE', shown: JSON.stringify(join(dir, 'both.token')), reason: 'set either LLMGW_TEST_ROUTER_TOKEN or LLMGW_TEST_ROUTER_TOKEN_FILE, not both' },
    ].sort((a, b) => a.variable.localeCompare(b.variable)));
    expect(error.message).not.toContain(secret);

    const empty = file('empty.token', '\n');
    expect(problemsOf(() => loadConfig(tokenSchema, { LLMGW_TEST_ROUTER_TOKEN_FILE: empty })).problems).toEqual([
      { variable: 'LLMGW_TEST_ROUTER_TOKEN_FILE', shown: JSON.stringify(empty), reason: 'the file is empty' },
    ]);
  });

  it('a directory is not a readable file; an empty _FILE counts as unset', () => {
    expect(problemsOf(() => loadConfig(tokenSchema, { LLMGW_TEST_ROUTER_TOKEN_FILE: dir })).problems).toEqual([
      { variable: 'LLMGW_TEST_ROUTER_TOKEN_FILE', shown: JSON.stringify(dir), reason: 'cannot read the file (EISDIR)' },
    ]);
    expect(problemsOf(() => loadConfig(tokenSchema, { LLMGW_TEST_ROUTER_TOKEN_FILE: '' })).problems).toEqual([
      { variable: 'LLMGW_TEST_ROUTER_TOKEN', shown: '(unset)', reason: 'is required' },
    ]);
  });

  it('does not read _FILE for variables that are not tokens', () => {
    const config = loadConfig(tokenSchema, { LLMGW_TEST_ROUTER_TOKEN: secret, LLMGW_TEST_NAME_FILE: join(dir, 'missing') });
    expect(config).toEqual({ router: secret, join: undefined });
  });
});
