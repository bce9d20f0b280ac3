import { describe, expect, it } from 'vitest';
import { clientHost, curlExample, planLocalCluster, type LocalClusterInput } from './local-cluster.plan';

const input: LocalClusterInput = {
  repoRoot: '/repo',
  dataDir: '/data',
  host: '127.0.0.1',
  ports: { router: 1, controller: 2, controllerGrpc: 3, catalog: 4, agent: 5 },
  catalogFile: '/data/catalog.yaml',
  adminToken: 'token-token-token-1',
  joinToken: 'join-join-join-join-1',
  routerToken: 'router-router-router-1',
  grpcTls: { caFile: '/data/tls/ca.crt', certFile: '/data/tls/controller.crt', keyFile: '/data/tls/controller.key' },
  llamaServer: '/repo/tools/llama-engine/bin/llama-server-node',
  userEnv: {},
};

describe('planLocalCluster', () => {
  it('starts four separate processes wired to the controller, sharing one data directory', () => {
    const plan = planLocalCluster(input, '/usr/bin/node');
    expect(plan.map((p) => p.app)).toEqual(['controller', 'catalog', 'router', 'agent']);
    for (const p of plan) {
      expect(p.command).toBe('/usr/bin/node');
      expect(p.args).toEqual(['/repo/tools/run.cjs', `/repo/apps/${p.app}/src/main.ts`]);
      expect(p.env.LLMGW_HOST).toBe('127.0.0.1');
    }
    const env = Object.fromEntries(plan.map((p) => [p.app, p.env]));
    expect(env.controller).toMatchObject({ LLMGW_CONTROLLER_PORT: '2', LLMGW_CONTROLLER_GRPC_PORT: '3', LLMGW_CONTROLLER_CATALOG_FILE: '/data/catalog.yaml', LLMGW_DATA_DIR: '/data', LLMGW_CONTROLLER_ADMIN_TOKEN: 'token-token-token-1' });
    // The controller requires a join and a router token; the agent and the router are given the same ones.
    expect(env.controller).toMatchObject({ LLMGW_CONTROLLER_JOIN_TOKEN: 'join-join-join-join-1', LLMGW_CONTROLLER_ROUTER_TOKEN: 'router-router-router-1' });
    expect(env.controller.LLMGW_CONTROLLER_INSECURE_NO_AUTH).toBeUndefined();
    expect(env.catalog).toMatchObject({ LLMGW_CATALOG_PORT: '4', LLMGW_CATALOG_ADMIN_TOKEN: 'token-token-token-1', LLMGW_DATA_DIR: '/data' });
    expect(env.router).toMatchObject({ LLMGW_ROUTER_PORT: '1', LLMGW_ROUTER_CONTROLLER: '127.0.0.1:3', LLMGW_ROUTER_CONTROLLER_TOKEN: 'router-router-router-1' });
    expect(env.agent).toMatchObject({
      LLMGW_AGENT_PORT: '5',
      LLMGW_AGENT_CONTROLLERS: '127.0.0.1:3',
      LLMGW_AGENT_JOIN_TOKEN: 'join-join-join-join-1',
      LLMGW_AGENT_CACHE_DIR: '/data/cache',
      LLMGW_AGENT_SOURCE_DIRS: '/data/models',
      LLMGW_DATA_DIR: '/data',
    });
    // The agent is told which llama.cpp executable runs; it looks for none on disk itself.
    expect(env.agent.LLMGW_AGENT_LLAMA_SERVER).toBe('/repo/tools/llama-engine/bin/llama-server-node');
  });

  it('gives the controller its gRPC server certificate and the agent and the router the CA; none with LLMGW_GRPC_INSECURE', () => {
    const env = Object.fromEntries(planLocalCluster(input, 'node').map((p) => [p.app, p.env]));
    expect(env.controller).toMatchObject({ LLMGW_GRPC_TLS_CERT: '/data/tls/controller.crt', LLMGW_GRPC_TLS_KEY: '/data/tls/controller.key' });
    expect(env.controller.LLMGW_GRPC_TLS_CA).toBeUndefined();
    for (const app of ['agent', 'router']) {
      expect(env[app].LLMGW_GRPC_TLS_CA).toBe('/data/tls/ca.crt');
      expect(env[app].LLMGW_GRPC_TLS_CERT).toBeUndefined();
    }
    expect(env.catalog.LLMGW_GRPC_TLS_CA).toBeUndefined();
    const insecure = planLocalCluster({ ...input, grpcTls: undefined, userEnv: { LLMGW_GRPC_INSECURE: 'true' } }, 'node');
    for (const p of insecure) expect(Object.keys(p.env).filter((k) => k.startsWith('LLMGW_GRPC_'))).toEqual([]);
  });

  it("never overrides a launcher default the user set, and reaches a wildcard bind on loopback", () => {
    const plan = planLocalCluster({ ...input, host: '0.0.0.0', userEnv: { LLMGW_CONTROLLER_SETTLE: '30s', LLMGW_AGENT_CACHE_DIR: '/big/disk', LLMGW_AGENT_SOURCE_DIRS: '/srv/models' } }, 'node');
    const env = Object.fromEntries(plan.map((p) => [p.app, p.env]));
    expect(env.controller.LLMGW_CONTROLLER_SETTLE).toBe('30s');
    expect(env.agent.LLMGW_AGENT_CACHE_DIR).toBe('/big/disk');
    expect(env.agent.LLMGW_AGENT_SOURCE_DIRS).toBe('/srv/models');
    expect(env.router.LLMGW_ROUTER_CONTROLLER).toBe('127.0.0.1:3');
  });
});

describe('clientHost', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['0.0.0.0', '127.0.0.1'],
    ['::', '[::1]'],
    ['::1', '[::1]'],
    ['myhost', 'myhost'],
  ])('%s → %s', (host, expected) => expect(clientHost(host)).toBe(expected));
});

describe('curlExample', () => {
  it('is one shell command posting a chat completion for the model', () => {
    expect(curlExample('http://127.0.0.1:8080/v1', 'llmgw-tiny')).toBe(
      `curl -sS http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"llmgw-tiny","messages":[{"role":"user","content":"Say hello"}],"max_tokens":32}'`,
    );
  });
  it("escapes a quote in the model name for the shell", () => {
    expect(curlExample('http://h/v1', "it's")).toContain(`"model":"it'\\''s"`);
  });
});
