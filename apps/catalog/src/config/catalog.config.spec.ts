import { join } from 'node:path';
import { ConfigError, loadConfig } from '@llmgw/config';
import { describe, expect, it } from 'vitest';
import { catalogConfigSchema } from './catalog.config';

describe('catalog config', () => {
  it('defaults: no token (API locked), 1MiB body limit, SQLite in the data dir', () => {
    const config = loadConfig(catalogConfigSchema, { LLMGW_DATA_DIR: '/var/lib/llmgw' });
    expect(config).toMatchObject({ port: 8083, adminToken: undefined, bodyLimitBytes: 1_048_576, databaseUrl: `sqlite:${join('/var/lib/llmgw', 'llmgw.db')}` });
  });

  it('reads a token, a body limit in bytes or units, and a database URL', () => {
    const config = loadConfig(catalogConfigSchema, {
      LLMGW_CATALOG_ADMIN_TOKEN: 'abcdefghijklmnop',
      LLMGW_CATALOG_BODY_LIMIT: '256KiB',
      LLMGW_DATABASE_URL: 'postgres://u@db/llmgw',
    });
    expect(config).toMatchObject({ adminToken: 'abcdefghijklmnop', bodyLimitBytes: 262_144, databaseUrl: 'postgres://u@db/llmgw' });
    expect(loadConfig(catalogConfigSchema, { LLMGW_CATALOG_BODY_LIMIT: '4096' }).bodyLimitBytes).toBe(4096);
  });

  it('refuses a short token and a bad or huge limit, naming each without showing the token', () => {
    let error: unknown;
    try {
      loadConfig(catalogConfigSchema, { LLMGW_CATALOG_ADMIN_TOKEN: 'short', LLMGW_CATALOG_BODY_LIMIT: '1GB' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    expect(message).toContain('LLMGW_CATALOG_ADMIN_TOKEN=<redacted>: expected 16 to 512 characters');
    expect(message).toContain('LLMGW_CATALOG_BODY_LIMIT="1GB": must be at most');
    expect(message).not.toContain('short');
    expect(() => loadConfig(catalogConfigSchema, { LLMGW_CATALOG_BODY_LIMIT: 'lots' })).toThrow(/LLMGW_CATALOG_BODY_LIMIT="lots": "lots" is not a size/);
    expect(() => loadConfig(catalogConfigSchema, { LLMGW_CATALOG_ADMIN_TOKEN: 'has space 0123456789' })).toThrow(/without whitespace/);
    // The example Secret's value, copied as is: refused as a placeholder.
    expect(() => loadConfig(catalogConfigSchema, { LLMGW_CATALOG_ADMIN_TOKEN: 'change-me-admin-token-0123' })).toThrow(/LLMGW_CATALOG_ADMIN_TOKEN=<redacted>: looks like an example placeholder/);
  });
});
