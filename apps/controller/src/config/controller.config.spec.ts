import { ConfigError, loadConfig } from '@llmgw/config';
import { describe, expect, it } from 'vitest';
import { controllerConfigSchema } from './controller.config';
import { testGrpcTlsEnv } from '@llmgw/testing';

/** The gRPC TLS files every config below is given (the test PKI), unless a test is about them. */
const TLS = testGrpcTlsEnv();

describe('controller config', () => {
  it('defaults: always leader, SQLite in the data dir, no tokens only when insecure mode is asked for', () => {
    const c = loadConfig(controllerConfigSchema, { ...TLS, LLMGW_DATA_DIR: '/var/lib/llmgw', LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true' });
    expect(c).toMatchObject({ port: 8081, grpcPort: 8082, databaseUrl: 'sqlite:/var/lib/llmgw/llmgw.db', timing: { heartbeatIntervalMs: 5_000, unreachableAfterMs: 15_000, lostAfterMs: 60_000 } });
    expect(c.lease).toBeUndefined();
    expect(c.joinToken).toBeUndefined();
    expect(c.routerToken).toBeUndefined();
    expect(c.insecureNoAuth).toBe(true);
    expect(c.adminToken).toBeUndefined();
  });

  it('refuses to start without a join token and a router token unless LLMGW_CONTROLLER_INSECURE_NO_AUTH=true', () => {
    const both = (() => {
      try {
        loadConfig(controllerConfigSchema, { ...TLS });
      } catch (e) {
        return e as Error;
      }
    })();
    expect(both).toBeInstanceOf(ConfigError);
    expect(both?.message).toMatch(/LLMGW_CONTROLLER_JOIN_TOKEN.*is required.*LLMGW_CONTROLLER_INSECURE_NO_AUTH=true/);
    expect(both?.message).toMatch(/LLMGW_CONTROLLER_ROUTER_TOKEN.*is required/);
    expect(() => loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_JOIN_TOKEN: 'j'.repeat(16) })).toThrow(/LLMGW_CONTROLLER_ROUTER_TOKEN/);
    expect(() => loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_ROUTER_TOKEN: 'r'.repeat(16) })).toThrow(/LLMGW_CONTROLLER_JOIN_TOKEN/);
    expect(() => loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false' })).toThrow(/LLMGW_CONTROLLER_JOIN_TOKEN/);
    // Insecure mode still takes a token that is given.
    expect(loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true', LLMGW_CONTROLLER_JOIN_TOKEN: 'j'.repeat(16) })).toMatchObject({ joinToken: 'j'.repeat(16), routerToken: undefined });
  });

  it.each([
    ['LLMGW_CONTROLLER_JOIN_TOKEN', 'change-me', 'expected 16 to 512 characters'],
    ['LLMGW_CONTROLLER_JOIN_TOKEN', 'change-me-join-token-0123', 'looks like an example placeholder'],
    ['LLMGW_CONTROLLER_ROUTER_TOKEN', 'CHANGEME-router-token-0123', 'looks like an example placeholder'],
    ['LLMGW_CONTROLLER_ROUTER_TOKEN', 'short-token', 'expected 16 to 512 characters'],
    ['LLMGW_CONTROLLER_ADMIN_TOKEN', 'change-me-admin-token-0123', 'looks like an example placeholder'],
    ['LLMGW_CONTROLLER_ADMIN_TOKEN', 'example-admin-token-0123', 'looks like an example placeholder'],
  ])('refuses %s=%s (a placeholder or too short), naming the variable, never the value', (variable, value, reason) => {
    const env = { LLMGW_CONTROLLER_JOIN_TOKEN: 'j'.repeat(16), LLMGW_CONTROLLER_ROUTER_TOKEN: 'r'.repeat(16), [variable]: value };
    let error: Error | undefined;
    try {
      loadConfig(controllerConfigSchema, env);
    } catch (e) {
      error = e as Error;
    }
    expect(error?.message).toContain(`${variable}=<redacted>: ${reason}`);
    expect(error?.message).not.toContain(value);
  });

  it('takes a lease, tokens and an advertised address', () => {
    const c = loadConfig(controllerConfigSchema, { ...TLS,
      LLMGW_CONTROLLER_LEASE: 'ctl',
      LLMGW_CONTROLLER_LEASE_TTL: '30s',
      LLMGW_CONTROLLER_JOIN_TOKEN: 'j'.repeat(16),
      LLMGW_CONTROLLER_ROUTER_TOKEN: 'r'.repeat(16),
      LLMGW_CONTROLLER_ADVERTISE_ADDRESS: '10.0.0.2:8082',
    });
    expect(c).toMatchObject({ lease: { name: 'ctl', ttlMs: 30_000, renewIntervalMs: 5_000 }, joinToken: 'j'.repeat(16), routerToken: 'r'.repeat(16), insecureNoAuth: false, advertiseAddress: '10.0.0.2:8082' });
    // The admin URL a standby forwards changes to: the advertised host on the HTTP port, unless given.
    expect(c.advertiseAdminUrl).toBe('http://10.0.0.2:8081');
    const given = loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true', LLMGW_CONTROLLER_ADVERTISE_ADMIN_URL: 'https://ctl-0.llmgw.svc:9443/' });
    expect(given.advertiseAdminUrl).toBe('https://ctl-0.llmgw.svc:9443');
    for (const bad of ['ftp://x:1', 'http://user:pw@x:1', 'http://x:1/admin', 'not a url']) {
      expect(() => loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true', LLMGW_CONTROLLER_ADVERTISE_ADMIN_URL: bad }), bad).toThrow(/LLMGW_CONTROLLER_ADVERTISE_ADMIN_URL/);
    }
  });

  it('refuses inconsistent windows and bad values, naming every variable', () => {
    let error: unknown;
    try {
      loadConfig(controllerConfigSchema, { ...TLS,
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
      loadConfig(controllerConfigSchema, { ...TLS, LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true', LLMGW_CONTROLLER_UNREACHABLE_AFTER: '5s', LLMGW_CONTROLLER_LOST_AFTER: '5s' });
    } catch (e) {
      windows = e;
    }
    expect((windows as Error).message).toContain('LLMGW_CONTROLLER_UNREACHABLE_AFTER');
    expect((windows as Error).message).toContain('LLMGW_CONTROLLER_LOST_AFTER');
  });

  it('serves gRPC over TLS: without a certificate it refuses to start unless LLMGW_GRPC_INSECURE=true names plaintext on purpose', () => {
    const base = { LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true' };
    expect(() => loadConfig(controllerConfigSchema, base)).toThrow(/LLMGW_GRPC_TLS_CERT.*is required.*LLMGW_GRPC_INSECURE=true/);
    expect(() => loadConfig(controllerConfigSchema, { ...base, LLMGW_GRPC_TLS_CERT: TLS.LLMGW_GRPC_TLS_CERT })).toThrow(/LLMGW_GRPC_TLS_KEY.*is required/);
    expect(() => loadConfig(controllerConfigSchema, { ...base, ...TLS, LLMGW_GRPC_TLS_KEY: '/nonexistent/llmgw.key' })).toThrow(/LLMGW_GRPC_TLS_KEY.*does not exist/);
    expect(loadConfig(controllerConfigSchema, { ...base, ...TLS }).grpc).toMatchObject({ insecure: false, certFile: TLS.LLMGW_GRPC_TLS_CERT, keyFile: TLS.LLMGW_GRPC_TLS_KEY, clientAuth: false });
    expect(loadConfig(controllerConfigSchema, { ...base, ...TLS, LLMGW_GRPC_TLS_CLIENT_AUTH: 'true' }).grpc).toMatchObject({ clientAuth: true, caFile: TLS.LLMGW_GRPC_TLS_CA });
    expect(loadConfig(controllerConfigSchema, { ...base, LLMGW_GRPC_INSECURE: 'true' }).grpc).toMatchObject({ insecure: true });
  });
});
