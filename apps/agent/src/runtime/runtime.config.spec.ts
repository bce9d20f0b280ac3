import { ConfigError, loadConfig } from '@llmgw/config';
import { describe, expect, it } from 'vitest';
import { agentConfigSchema } from '../config/agent.config';
import { pickEngineEnv } from './runtime.config';
import { testGrpcTlsEnv } from '@llmgw/testing';

/** The CA every config below trusts for the controller (the test PKI's), unless a test is about it. */
const TLS = { LLMGW_GRPC_TLS_CA: testGrpcTlsEnv().LLMGW_GRPC_TLS_CA };

describe('agent runtime settings', () => {
  it('defaults: state under the data directory, one local controller, engines bound where routers reach them', () => {
    const config = loadConfig(agentConfigSchema, { ...TLS, LLMGW_DATA_DIR: '/var/lib/llmgw' });
    expect(config.runtime).toMatchObject({
      stateDir: '/var/lib/llmgw/agent',
      controllers: ['127.0.0.1:8082'],
      advertiseAddress: '127.0.0.1',
      engineHost: '127.0.0.1',
      enginePorts: { first: 20_000, last: 29_999 },
      restartLimit: 5,
      hfEndpoint: 'https://huggingface.co',
    });
    expect(config.runtime.joinToken).toBeUndefined();
    expect(config.runtime.engineOverride).toBeUndefined();
    // The engine programs are what the settings say; nothing is looked for on disk.
    expect(config.runtime.llamaServerBinary).toBe('llama-server');
  });

  it('the simulator runs only when named twice: the override and the program', () => {
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_ENGINE_OVERRIDE: 'sim' })).toThrow(/LLMGW_AGENT_SIM_ENGINE.*required with LLMGW_AGENT_ENGINE_OVERRIDE=sim/);
    // The program alone changes nothing.
    expect(loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_SIM_ENGINE: '/opt/sim' }).runtime.engineOverride).toBeUndefined();
  });

  it('reads every setting it is given', () => {
    const config = loadConfig(agentConfigSchema, {
      ...TLS,
      LLMGW_AGENT_STATE_DIR: '/srv/agent',
      LLMGW_AGENT_CONTROLLERS: 'ctl-a:8082, [fd00::1]:8082',
      LLMGW_AGENT_JOIN_TOKEN: 'tok-0123456789abcdef',
      LLMGW_AGENT_ADVERTISE_ADDRESS: 'gpu-7.lan',
      LLMGW_AGENT_ENGINE_HOST: '0.0.0.0',
      LLMGW_AGENT_ENGINE_PORTS: '40000-40999',
      LLMGW_AGENT_ENGINE_OVERRIDE: 'sim',
      LLMGW_AGENT_SIM_ENGINE: '/opt/sim/bin/sim-engine',
      LLMGW_AGENT_RESTART_BACKOFF: '1s',
      LLMGW_AGENT_RESTART_BACKOFF_MAX: '1m',
      HF_ENDPOINT: 'http://mirror.lan:8080',
      HF_TOKEN: 'hf_x',
    });
    expect(config.runtime).toMatchObject({
      stateDir: '/srv/agent',
      controllers: ['ctl-a:8082', '[fd00::1]:8082'],
      joinToken: 'tok-0123456789abcdef',
      advertiseAddress: 'gpu-7.lan',
      engineHost: '0.0.0.0',
      enginePorts: { first: 40_000, last: 40_999 },
      engineOverride: 'sim',
      simEngine: '/opt/sim/bin/sim-engine',
      restartBackoffMs: 1_000,
      restartBackoffMaxMs: 60_000,
      hfEndpoint: 'http://mirror.lan:8080',
      hfToken: 'hf_x',
    });
  });

  it('refuses bad values, naming every one, and never shows the token', () => {
    let error: unknown;
    try {
      loadConfig(agentConfigSchema, {
      ...TLS,
        LLMGW_AGENT_CONTROLLERS: 'ctl-a,ctl-b:99999',
        LLMGW_AGENT_ADVERTISE_ADDRESS: '0.0.0.0',
        LLMGW_AGENT_ENGINE_OVERRIDE: 'fake',
        LLMGW_AGENT_NODE_ID: '../x',
        HF_ENDPOINT: 'ftp://x',
        LLMGW_AGENT_JOIN_TOKEN: 'super-secret',
        LLMGW_AGENT_RESTART_LIMIT: '-1',
        LLMGW_AGENT_ENGINE_PORTS: '30000-20000',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    for (const v of ['LLMGW_AGENT_CONTROLLERS', 'LLMGW_AGENT_ADVERTISE_ADDRESS', 'LLMGW_AGENT_ENGINE_OVERRIDE', 'LLMGW_AGENT_NODE_ID', 'HF_ENDPOINT', 'LLMGW_AGENT_RESTART_LIMIT', 'LLMGW_AGENT_ENGINE_PORTS']) {
      expect(message).toContain(v);
    }
    expect(message).toContain('wildcard address routers cannot reach');
    expect(message).toContain('the first port 30000 is above the last 20000');
    expect(message).not.toContain('super-secret');
  });

  it.each([
    ['too short', 'short-token', 'expected 16 to 512 characters'],
    ['the example placeholder', 'change-me', 'expected 16 to 512 characters'],
    ['a long example placeholder', 'change-me-join-token-0123', 'looks like an example placeholder'],
  ])('refuses a join token that is %s, naming the variable', (_what, token, reason) => {
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_JOIN_TOKEN: token })).toThrow(new RegExp(`LLMGW_AGENT_JOIN_TOKEN=<redacted>: ${reason}`));
  });

  it('the source policy is safe by default: https and hf only, no file://, no refused range, any env not denied', () => {
    const { sourcePolicy } = loadConfig(agentConfigSchema, { ...TLS }).runtime;
    expect(sourcePolicy).toEqual({ schemes: ['https', 'hf'], allowNets: [], dirs: [] });
  });

  it('reads the source policy it is given', () => {
    const { sourcePolicy } = loadConfig(agentConfigSchema, {
      ...TLS,
      LLMGW_AGENT_SOURCE_SCHEMES: 'https,http',
      LLMGW_AGENT_SOURCE_HOSTS: 'models.lan,*.Mirror.example',
      LLMGW_AGENT_SOURCE_ALLOW_NETS: '10.0.0.0/8, fd00::/8, 127.0.0.1',
      LLMGW_AGENT_SOURCE_DIRS: '/srv/models/,/data',
      LLMGW_AGENT_PROFILE_ENV_ALLOW: 'HF_*,NCCL_DEBUG',
    }).runtime;
    expect(sourcePolicy).toMatchObject({
      schemes: ['https', 'http'],
      hosts: ['models.lan', '*.mirror.example'],
      allowNets: [{ text: '10.0.0.0/8', prefix: 8 }, { text: 'fd00::/8', prefix: 8 }, { text: '127.0.0.1', prefix: 32 }],
      dirs: ['/srv/models', '/data'],
      envAllow: ['HF_*', 'NCCL_DEBUG'],
    });
  });

  it.each([
    ['LLMGW_AGENT_SOURCE_SCHEMES', 'https,ftp', /LLMGW_AGENT_SOURCE_SCHEMES.*expected one of https, http, hf/],
    ['LLMGW_AGENT_SOURCE_SCHEMES', 'file', /LLMGW_AGENT_SOURCE_SCHEMES.*file:\/\/ is allowed by LLMGW_AGENT_SOURCE_DIRS/],
    ['LLMGW_AGENT_SOURCE_HOSTS', 'http://models.lan', /LLMGW_AGENT_SOURCE_HOSTS.*expected a host name/],
    ['LLMGW_AGENT_SOURCE_ALLOW_NETS', '10.0.0.0/40', /LLMGW_AGENT_SOURCE_ALLOW_NETS.*expected an IP address or a network/],
    ['LLMGW_AGENT_SOURCE_DIRS', 'models', /LLMGW_AGENT_SOURCE_DIRS.*expected an absolute directory/],
    ['HF_ENDPOINT', 'http://127.0.0.1:9000', /HF_ENDPOINT.*127\.0\.0\.1 is in a refused range \(loopback.*LLMGW_AGENT_SOURCE_ALLOW_NETS/],
  ])('refuses %s=%s', (name, value, message) => {
    expect(() => loadConfig(agentConfigSchema, { ...TLS, [name]: value })).toThrow(message);
  });

  it('an HF_ENDPOINT in a refused range is accepted once its network is allowed', () => {
    expect(loadConfig(agentConfigSchema, { ...TLS, HF_ENDPOINT: 'http://127.0.0.1:9000', LLMGW_AGENT_SOURCE_ALLOW_NETS: '127.0.0.1/32' }).runtime.hfEndpoint).toBe('http://127.0.0.1:9000');
  });

  it('checks ready engines every 5s by default, and refuses a check with no time or no failure to count', () => {
    expect(loadConfig(agentConfigSchema, { ...TLS }).runtime.liveness).toEqual({ intervalMs: 5_000, timeoutMs: 3_000, failures: 3 });
    expect(
      loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_LIVENESS_INTERVAL: '1s', LLMGW_AGENT_LIVENESS_TIMEOUT: '500ms', LLMGW_AGENT_LIVENESS_FAILURES: '5' }).runtime.liveness,
    ).toEqual({ intervalMs: 1_000, timeoutMs: 500, failures: 5 });
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_LIVENESS_INTERVAL: '0' })).toThrow(/LLMGW_AGENT_LIVENESS_INTERVAL.*at least 1ms/);
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_LIVENESS_TIMEOUT: '0' })).toThrow(/LLMGW_AGENT_LIVENESS_TIMEOUT.*at least 1ms/);
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_LIVENESS_FAILURES: '0' })).toThrow(/LLMGW_AGENT_LIVENESS_FAILURES/);
  });

  it('refuses bounds that contradict each other', () => {
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_RECONNECT_MIN: '10s', LLMGW_AGENT_RECONNECT_MAX: '1s' })).toThrow(/LLMGW_AGENT_RECONNECT_MAX.*must not be shorter/);
    expect(() => loadConfig(agentConfigSchema, { ...TLS, LLMGW_AGENT_RESTART_BACKOFF: '0' })).toThrow(/LLMGW_AGENT_RESTART_BACKOFF.*at least 1ms/);
  });

  it('engines inherit only the listed variables, and never the agent’s own LLMGW_* settings', () => {
    const inherited = { PATH: '/usr/bin', HOME: '/root', LC_ALL: 'C', NCCL_DEBUG: 'INFO', LLMGW_AGENT_JOIN_TOKEN: 'secret', HF_TOKEN: 'hf', AWS_SECRET: 'x', EMPTY: undefined };
    expect(pickEngineEnv(inherited, ['PATH', 'LC_*', 'NCCL_*', 'LLMGW_*'])).toEqual({ PATH: '/usr/bin', LC_ALL: 'C', NCCL_DEBUG: 'INFO' });
    expect(pickEngineEnv(inherited, ['HF_TOKEN'])).toEqual({ HF_TOKEN: 'hf' });
  });
});
