// Node identity over real gRPC against the in-process controller, with a join token set: a rogue
// client that holds the join token re-registers in a loop under a live node's id with its own
// address (the hijack issue #13 reported: 54 of 60 chat requests diverted). The live session must
// win every time, the endpoint address must never change, and the rogue must get nothing. Then
// the same agent reconnecting still replaces its older stream, and `llmgw nodes forget` lets a
// re-installed machine join again under a lost node's id.
import { Metadata, status } from '@grpc/grpc-js';
import { openStore } from '@llmgw/store';
import { sqliteBackend, testChannelCredentials, type TestDatabase, waitFor } from '@llmgw/testing';
import { AgentServiceClient, type ConnectResponse, type Register } from '@llmgw/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeAgent } from '../test/agent.fake';
import { catalogDoc, catalogFile, startController, WatchingRouter, type TestController } from '../test/controller.harness';

const JOIN_TOKEN = 'identity-join-token-0123456789';
const ROUTER_TOKEN = 'identity-router-token-0123456789';
const ADMIN_TOKEN = 'identity-admin-token-0123456789';
const ROGUE_ADDRESS = '10.66.66.66';

/** What one raw Connect stream got: every message, and how it ended. */
interface StreamOutcome {
  readonly messages: NonNullable<ConnectResponse['payload']>[];
  readonly code: number;
  readonly details: string;
}

/**
 * Opens AgentService.Connect with the join token, sends `register`, and collects what comes back
 * until the stream ends (or, with `holdUntilWelcome`, until a Welcome arrives: the stream is
 * then returned open through `cancel`).
 */
function connectAs(address: string, register: Partial<Register> & { nodeId: string }, options: { holdUntilWelcome?: boolean } = {}): Promise<StreamOutcome & { cancel(): void }> {
  const client = new AgentServiceClient(address, testChannelCredentials());
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${JOIN_TOKEN}`);
  const call = client.connect(metadata, { deadline: Date.now() + 10_000 });
  const messages: NonNullable<ConnectResponse['payload']>[] = [];
  const cancel = (): void => {
    call.cancel();
    client.close();
  };
  return new Promise((resolve) => {
    call.on('data', (r: ConnectResponse) => {
      if (!r.payload) return;
      messages.push(r.payload);
      if (options.holdUntilWelcome && r.payload.$case === 'welcome') resolve({ messages, code: status.OK, details: '', cancel });
    });
    call.on('error', () => undefined);
    call.on('status', (s) => {
      client.close();
      resolve({ messages, code: s.code, details: s.details, cancel });
    });
    call.write({
      payload: {
        $case: 'register',
        value: { address: ROGUE_ADDRESS, labels: {}, gpus: [], cpuCores: 4, memoryBytes: 8e9, replicas: [], agentVersion: 'rogue', ...register },
      },
    });
  });
}

describe('node identity', () => {
  let db: TestDatabase;
  let file: ReturnType<typeof catalogFile>;
  let controller: TestController;
  let router: WatchingRouter;
  const agents: FakeAgent[] = [];

  beforeAll(async () => {
    db = await sqliteBackend.create();
    file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    controller = await startController({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN_TOKEN,
      LLMGW_CONTROLLER_ROUTER_TOKEN: ROUTER_TOKEN,
      LLMGW_CONTROLLER_ADMIN_TOKEN: ADMIN_TOKEN,
      LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
      LLMGW_CONTROLLER_SETTLE: '200ms',
    });
    router = new WatchingRouter(controller.grpc, 'identity-router', false, ROUTER_TOKEN);
  }, 60_000);

  afterAll(async () => {
    router?.close();
    await Promise.all(agents.map((a) => a.stop()));
    await controller?.close();
    await db?.drop();
    file?.cleanup();
  });

  it(
    'a rogue holding the join token re-registers 30 times under a live node id: refused every time, the live session and the endpoint address kept, no StartReplica',
    async () => {
      const agent = new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], token: JOIN_TOKEN, engines: 'none', address: '127.0.0.1' });
      agents.push(agent);
      agent.connect();
      await waitFor(() => router.latest?.endpoints.length === 1, { deadlineMs: 30_000, message: 'one endpoint on node-1' });
      expect(agent.nodeSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const url = router.urls()[0];
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const session = controller.plane.sessions.get('node-1');
      expect(session).toBeDefined();
      const welcomes = agent.welcomes;
      const startsBefore = controller.plane.sessions.sent.startReplica;
      const snapshotsBefore = router.snapshots.length;

      // The attack: no secret, then guessed ones, each on a new stream, one after another.
      const outcomes: StreamOutcome[] = [];
      for (let i = 0; i < 30; i++) {
        const guess = i % 3 === 0 ? {} : { nodeSecret: i % 3 === 1 ? 'A'.repeat(43) : `${agent.nodeSecret?.slice(0, 42)}x` };
        outcomes.push(await connectAs(controller.grpc, { nodeId: 'node-1', ...guess }));
      }

      for (const o of outcomes) {
        expect(o.code).toBe(status.PERMISSION_DENIED);
        expect(o.details).toContain("node id 'node-1' is bound to another agent");
        // Not a Welcome, not a StartReplica, nothing.
        expect(o.messages).toEqual([]);
      }
      // The live session is the same stream, never closed; the agent never had to reconnect.
      expect(controller.plane.sessions.get('node-1')).toBe(session);
      expect(agent.welcomes).toBe(welcomes);
      expect(agent.connectedTo).toBe(controller.grpc);
      expect(controller.plane.nodes.get('node-1')?.info.address).toBe('127.0.0.1');
      expect(controller.plane.sessions.sent.startReplica).toBe(startsBefore);
      // Routers never saw another address for the endpoint.
      for (const s of router.snapshots.slice(snapshotsBefore)) for (const e of s.endpoints) expect(e.url).toBe(url);
      expect(router.urls()).toEqual([url]);
      // Refusals are logged without any secret.
      const refused = controller.logs.filter((l) => l.msg === 'agent refused: node id bound to another agent');
      expect(refused).toHaveLength(30);
      const logText = JSON.stringify(controller.logs);
      expect(logText).not.toContain(agent.nodeSecret);
      expect(logText).not.toContain('A'.repeat(43));
      // The store holds only a hash of the secret.
      const stored = await controller.plane.authenticate('node-1', agent.nodeSecret);
      expect(stored).toEqual({ ok: true });
    },
    90_000,
  );

  it('the same agent (its node secret) reconnecting replaces its older stream; the store holds only a hash', async () => {
    const agent = agents[0];
    const before = controller.plane.sessions.get('node-1');
    const again = await connectAs(controller.grpc, { nodeId: 'node-1', address: '127.0.0.1', nodeSecret: agent.nodeSecret }, { holdUntilWelcome: true });
    try {
      expect(again.messages[0]).toMatchObject({ $case: 'welcome' });
      // No new secret for a node that already has one.
      expect(again.messages[0].$case === 'welcome' && again.messages[0].value.nodeSecret).toBeUndefined();
      await waitFor(() => controller.plane.sessions.get('node-1') !== before, { deadlineMs: 5_000, message: 'the newer stream is the node’s' });
    } finally {
      again.cancel();
    }
    // The fake agent's stream was closed by the newer one; it reconnects with its secret and is welcomed again.
    const welcomes = agent.welcomes;
    await waitFor(() => agent.welcomes > welcomes && controller.plane.sessions.get('node-1') !== undefined, { deadlineMs: 10_000, message: 'the agent back' });
    const store = await openStore(db.url);
    try {
      const hash = await store.nodes.credentialHash('node-1');
      expect(hash).toMatch(/^[0-9a-f]{64}$/);
      expect(hash).not.toContain(agent.nodeSecret);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('forgetting a node (DELETE /v1/admin/nodes/ID, `llmgw nodes forget`) refuses a live node (409), forgets a lost one with its secret, and a re-installed machine joins again under the id', async () => {
    const forget = (node: string, token: string | null = ADMIN_TOKEN) =>
      fetch(`${controller.http}/v1/admin/nodes/${node}`, { method: 'DELETE', headers: token === null ? {} : { authorization: `Bearer ${token}` } });
    const old = new FakeAgent({ nodeId: 'node-2', controllers: [controller.grpc], token: JOIN_TOKEN, engines: 'none' });
    agents.push(old);
    old.connect();
    await waitFor(() => old.nodeSecret !== undefined && controller.plane.nodes.get('node-2')?.connected === true, { deadlineMs: 10_000, message: 'node-2 joined' });

    // Live: refused with a problem+json 409 naming the state.
    const live = await forget('node-2');
    expect(live.status).toBe(409);
    expect(live.headers.get('content-type')).toContain('application/problem+json');
    expect(await live.json()).toMatchObject({ status: 409, detail: expect.stringContaining("node 'node-2' is healthy and connected") });
    // Without the admin token: 401, whatever the node. Unknown node: 404.
    expect((await forget('node-2', null)).status).toBe(401);
    expect((await forget('nope')).status).toBe(404);

    // The machine dies and is re-installed: its new agent has no secret and is refused until the old node is forgotten.
    await old.kill();
    const early = await connectAs(controller.grpc, { nodeId: 'node-2' });
    expect(early.code).toBe(status.PERMISSION_DENIED);
    await waitFor(() => controller.plane.nodes.get('node-2')?.info.state === 'lost', { deadlineMs: 15_000, message: 'node-2 lost' });

    expect((await forget('node-2')).status).toBe(204);
    expect(controller.plane.nodes.get('node-2')).toBeUndefined();
    const store = await openStore(db.url);
    try {
      await waitFor(async () => (await store.nodes.get('node-2')) === undefined, { deadlineMs: 5_000, message: 'node-2 gone from the store' });
      expect(await store.nodes.credentialHash('node-2')).toBeUndefined();
      expect((await store.events.list({ nodeId: 'node-2' })).map((e) => e.kind)).toContain('forgotten');
    } finally {
      await store.close();
    }

    const fresh = new FakeAgent({ nodeId: 'node-2', controllers: [controller.grpc], token: JOIN_TOKEN, engines: 'none' });
    agents.push(fresh);
    fresh.connect();
    await waitFor(() => fresh.welcomes > 0, { deadlineMs: 10_000, message: 'the re-installed machine joined' });
    expect(fresh.nodeSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fresh.nodeSecret).not.toBe(old.nodeSecret);
    // And the old machine's secret no longer opens the id.
    const stale = await connectAs(controller.grpc, { nodeId: 'node-2', nodeSecret: old.nodeSecret });
    expect(stale.code).toBe(status.PERMISSION_DENIED);
  }, 60_000);
  it('a lost node reconnecting while it is being forgotten is told to retry, never left live on an id with no credential that another agent could take', async () => {
    const forget = (node: string) => fetch(`${controller.http}/v1/admin/nodes/${node}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    // The controller's own store: each call can be held back 800 ms to open the race.
    const nodes = (controller.plane as unknown as { options: { store: { nodes: Record<'remove' | 'credentialHash', (id: string) => Promise<unknown>> } } }).options.store.nodes;
    const slow = (name: 'remove' | 'credentialHash'): (() => void) => {
      const original = nodes[name];
      nodes[name] = async (id: string) => {
        await new Promise((r) => setTimeout(r, 800));
        return original.call(nodes, id);
      };
      return () => {
        nodes[name] = original;
      };
    };
    const lostNode = async (id: string): Promise<string> => {
      const agent = new FakeAgent({ nodeId: id, controllers: [controller.grpc], token: JOIN_TOKEN, engines: 'none' });
      agents.push(agent);
      agent.connect();
      await waitFor(() => agent.nodeSecret !== undefined && controller.plane.nodes.get(id)?.connected === true, { deadlineMs: 10_000, message: `${id} joined` });
      await agent.kill();
      await waitFor(() => controller.plane.nodes.get(id)?.info.state === 'lost', { deadlineMs: 15_000, message: `${id} lost` });
      return agent.nodeSecret as string;
    };
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

    // A: the machine comes back while the store is removing the node.
    const secret3 = await lostNode('node-3');
    let restore = slow('remove');
    const forgetting3 = forget('node-3');
    await pause(200);
    const during = await connectAs(controller.grpc, { nodeId: 'node-3', nodeSecret: secret3 }, { holdUntilWelcome: true });
    restore();
    expect((await forgetting3).status).toBe(204);
    during.cancel();
    // B: its identity check read the credential just before the forget removed it.
    const secret4 = await lostNode('node-4');
    restore = slow('credentialHash');
    const spanning = connectAs(controller.grpc, { nodeId: 'node-4', nodeSecret: secret4 }, { holdUntilWelcome: true });
    await pause(200);
    restore();
    expect((await forget('node-4')).status).toBe(204);
    const across = await spanning;
    across.cancel();

    for (const [id, outcome] of [['node-3', during], ['node-4', across]] as const) {
      expect(outcome.messages).toEqual([]);
      expect(outcome.code).toBe(status.UNAVAILABLE);
      // Forgotten for good: no record, no session, no credential.
      expect(controller.plane.nodes.get(id)).toBeUndefined();
      expect(controller.plane.sessions.get(id)).toBeUndefined();
    }
    const store = await openStore(db.url);
    try {
      expect(await store.nodes.credentialHash('node-3')).toBeUndefined();
      expect(await store.nodes.credentialHash('node-4')).toBeUndefined();
    } finally {
      await store.close();
    }
  }, 90_000);
  it('a first join whose stream is gone before its Welcome binds no secret: the agent’s retry is welcomed with one instead of being locked out', async () => {
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const plane = controller.plane as unknown as { admit(): Promise<unknown>; options: { store: { nodes: { credentialHash(id: string): Promise<unknown> } } } };
    /** Opens Connect, sends Register, and cancels the stream after `ms` (as an agent's Welcome timeout does). */
    const registerThenCancel = async (nodeId: string, ms: number): Promise<void> => {
      const client = new AgentServiceClient(controller.grpc, testChannelCredentials());
      const metadata = new Metadata();
      metadata.set('authorization', `Bearer ${JOIN_TOKEN}`);
      const call = client.connect(metadata);
      call.on('error', () => undefined);
      call.write({ payload: { $case: 'register', value: { nodeId, address: '127.0.0.1', labels: {}, gpus: [], cpuCores: 4, memoryBytes: 8e9, replicas: [], agentVersion: 'slow' } } });
      await pause(ms);
      call.cancel();
      client.close();
    };
    // A: the controller is still loading its state (admit waits) when the agent gives up.
    const admit = plane.admit;
    plane.admit = async () => {
      await pause(800);
      return admit.call(controller.plane);
    };
    await registerThenCancel('node-5', 200);
    await pause(1_000);
    plane.admit = admit;
    // B: the store is slow to answer the identity check itself.
    const nodes = plane.options.store.nodes;
    const credentialHash = nodes.credentialHash;
    nodes.credentialHash = async (id: string) => {
      await pause(800);
      return credentialHash.call(nodes, id);
    };
    await registerThenCancel('node-6', 200);
    await pause(1_000);
    nodes.credentialHash = credentialHash;

    for (const id of ['node-5', 'node-6']) {
      // Nothing was kept for the stream that went away.
      expect(controller.plane.nodes.get(id)).toBeUndefined();
      const retry = await connectAs(controller.grpc, { nodeId: id }, { holdUntilWelcome: true });
      retry.cancel();
      expect(retry.code).toBe(status.OK);
      const welcome = retry.messages[0];
      expect(welcome?.$case === 'welcome' && welcome.value.nodeSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
  }, 60_000);
});
