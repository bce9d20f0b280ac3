import { ConfigError, loadConfig } from '@llmgw/config';
import { describe, expect, it } from 'vitest';
import { controllerConfigSchema } from './controller.config';

describe('controller config', () => {
  it('defaults: always leader, SQLite in the data dir, no tokens', () => {
    const c = loadConfig(controllerConfigSchema, { LLMGW_DATA_DIR: '/var/lib/llmgw' });
    expect(c).toMatchObject({ port: 8081, grpcPort: 8082, databaseUrl: 'sqlite:/var/lib/llmgw/llmgw.db', timing: { heartbeatIntervalMs: 5_000, unreachableAfterMs: 15_000, lostAfterMs: 60_000 } });
    expect(c.lease).toBeUndefined();
    expect(c.joinToken).toBeUndefined();
    expect(c.adminToken).toBeUndefined();
  });

  it('takes a lease, tokens and an advertised address', () => {
    const c = loadConfig(controllerConfigSchema, {
      LLMGW_CONTROLLER_LEASE: 'ctl',
      LLMGW_CONTROLLER_LEASE_TTL: '30s',
      LLMGW_CONTROLLER_JOIN_TOKEN: 'j'.repeat(16),
      LLMGW_CONTROLLER_ADVERTISE_ADDRESS: '10.0.0.2:8082',
    });
    expect(c).toMatchObject({ lease: { name: 'ctl', ttlMs: 30_000, renewIntervalMs: 5_000 }, joinToken: 'j'.repeat(16), advertiseAddress: '10.0.0.2:8082' });
  });

  it('refuses inconsistent windows and bad values, naming every variable', () => {
    let error: unknown;
    try {
      loadConfig(controllerConfigSchema, {
        LLMGW_CONTROLLER_UNREACHABLE_AFTER: '5s',
        LLMGW_CONTROLLER_LOST_AFTER: '5s',
        LLMGW_CONTROLLER_ADMIN_TOKEN: 'short',
        LLMGW_CONTROLLER_ADVERTISE_ADDRESS: 'no-port',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const text = (error as Error).message;
    for (const v of ['LLMGW_CONTROLLER_ADMIN_TOKEN', 'LLMGW_CONTROLLER_ADVERTISE_ADDRESS']) expect(text).toContain(v);
    expect(text).not.toContain('short');
    let windows: unknown;
    try {
      loadConfig(controllerConfigSchema, { LLMGW_CONTROLLER_UNREACHABLE_AFTER: '5s', LLMGW_CONTROLLER_LOST_AFTER: '5s' });
    } catch (e) {
      windows = e;
    }
    expect((windows as Error).message).toContain('LLMGW_CONTROLLER_UNREACHABLE_AFTER');
    expect((windows as Error).message).toContain('LLMGW_CONTROLLER_LOST_AFTER');
  });
});
