// A controller's publishing side and a router core in one process, joined by the in-process
// EndpointSink (ARCHITECTURE: "nothing above it knows whether the router is in the same
// process"): no gRPC, no wire mapping. The controller side is real (node and replica registries,
// the replica-state fold, the EndpointPublisher and its snapshot builder); the router is the real
// RouterCore serving through Node's HTTP server; the engine is a tiny HTTP server on port 0.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { Catalog } from '@llmgw/catalog';
import { loadConfig } from '@llmgw/config';
import type { NodeRegistration, ReplicaEntry } from '@llmgw/control';
import { waitFor } from '@llmgw/testing';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeRegistry } from '../../../apps/controller/src/nodes/node.registry';
import { EndpointPublisher } from '../../../apps/controller/src/publishing/endpoint.publisher';
import { ReplicaRegistry } from '../../../apps/controller/src/replicas/replica.registry';
import { routerConfigSchema } from '../../../apps/router/src/config/router.config';
import { serveNodeRequest } from '../../../apps/router/src/http1';
import { RouterCore } from '../../../apps/router/src/router.core';
import { FakeUpstream } from '../../../apps/router/src/test/router.harness';

const logger = pino({ level: 'silent' });
const catalog = Catalog.create({
  models: [{ name: 'tiny', aliases: ['t'], source: 'hf://o/tiny@main', size: 1, replicas: 1, profiles: [{ engine: 'vllm', gpuClass: 'H100' }] }],
});

const gpu = { index: 0, uuid: 'g0', name: 'H100', gpuClass: 'H100', memoryTotalBytes: 80, healthy: true };
const registration: NodeRegistration = { id: 'n1', address: '127.0.0.1', labels: {}, gpus: [gpu], cpuCores: 8, memoryBytes: 64, cacheDir: '/c', cacheEntries: [], replicas: [], agentVersion: '' };

/** A replica the reconciler placed on n1 and asked to start (its port comes with the agent's report). */
const starting: ReplicaEntry = {
  replica: { id: 'r1', model: 'tiny', profileIndex: 0, engine: 'vllm', members: [{ nodeId: 'n1', rank: 0, gpuIndices: [0] }], state: 'starting', restarts: 0, createdAt: 0, updatedAt: 0 },
  memberStates: {}, persisted: true, dirty: false, fetching: [],
};

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The controller's publishing side, wired as ControlPlane wires it: registries → publisher, a change schedules a refresh. */
function controllerSide() {
  const nodes = new NodeRegistry();
  const replicas = new ReplicaRegistry();
  const publisher = new EndpointPublisher({ nodes: () => nodes.snapshot(), replicas: () => replicas.values(), catalog: () => ({ catalog, revision: 4 }) }, logger);
  nodes.onChange(() => publisher.schedule());
  replicas.onChange(() => publisher.schedule());
  return { nodes, replicas, publisher };
}

/** A router core fed by `publisher` in this process, serving /v1 through Node's HTTP server on port 0. */
async function routerSide(publisher: EndpointPublisher): Promise<{ core: RouterCore; url: string }> {
  const config = loadConfig(routerConfigSchema, { LLMGW_ROUTER_PORT: '0', LLMGW_LOG_LEVEL: 'silent', LLMGW_DATA_DIR: tmpdir(), LLMGW_ROUTER_ID: 'in-process' });
  const core = new RouterCore({ config, logger, registry: new Registry(), snapshots: (sink) => publisher.attach(sink) });
  // Node's server hands each request over as the router's runtime does (body read, size checked).
  const server: Server = createServer((req, res) => serveNodeRequest(req, res, { maxBodyBytes: config.proxy.maxBodyBytes }, core.handle));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () => core.drain(),
    () => new Promise((resolve) => server.close(resolve)),
    () => core.close(),
  );
  return { core, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function chat(url: string, model: string): Promise<{ status: number; body: { model?: string } }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  return { status: res.status, body: (await res.json()) as { model?: string } };
}

describe('a controller and a router in one process', () => {
  it('routes to the endpoint the controller publishes, and stops when the controller withdraws it', async () => {
    const engine = await FakeUpstream.start({ metricsText: '' });
    cleanups.push(() => engine.close());
    const { nodes, replicas, publisher } = controllerSide();
    const { core, url } = await routerSide(publisher);
    expect(core.mode).toBe('controller');

    nodes.register(registration, 0);
    replicas.add(starting);
    let ready = false;
    core.start(() => (ready = true));
    publisher.open();
    // The first snapshot reaches the router as the controller builds it: the model, no endpoint yet.
    expect(ready).toBe(true);
    expect(core.endpoints.revision).toBe(publisher.current()?.revision);
    expect(core.endpoints.catalog.resolve('t')?.name).toBe('tiny');
    expect(core.endpoints.size).toBe(0);

    // The agent reports the replica ready on the engine's port: the controller publishes it, the router takes it.
    replicas.report('r1', { nodeId: 'n1', state: 'ready', port: engine.port }, 1);
    await waitFor(() => core.endpoints.size === 1, { message: 'the router to take the published endpoint' });
    expect(core.endpoints.revision).toBe(publisher.current()?.revision);
    expect(publisher.current()?.endpoints).toEqual([{ replicaId: 'r1', model: 'tiny', url: engine.url, engine: 'vllm', nodeId: 'n1', suspect: false }]);
    const served = await chat(url, 'tiny');
    expect(served.status).toBe(200);
    expect(served.body.model).toBe('tiny');
    expect(engine.hits).toBe(1);

    // The replica goes away: the removal reaches the router, which no longer sends anything to the engine.
    replicas.remove('r1');
    await waitFor(() => core.endpoints.size === 0, { message: 'the router to drop the withdrawn endpoint' });
    expect(core.endpoints.revision).toBe(publisher.current()?.revision);
    const refused = await chat(url, 'tiny');
    expect(refused.status).toBe(503);
    expect(engine.hits).toBe(1);
  });

  it('refuses an in-process source together with controller addresses', () => {
    const { publisher } = controllerSide();
    const config = loadConfig(routerConfigSchema, { LLMGW_ROUTER_PORT: '0', LLMGW_DATA_DIR: tmpdir(), LLMGW_ROUTER_CONTROLLER: '127.0.0.1:1', LLMGW_GRPC_INSECURE: 'true' });
    expect(() => new RouterCore({ config, logger, registry: new Registry(), snapshots: (sink) => publisher.attach(sink) })).toThrow(/exclude each other/);
  });
});
