// Two controllers on one store, on SQLite and on PostgreSQL: one leads, the other turns agents
// away with NotLeader naming the leader; a model wanting 2 replicas ends with exactly 2, also
// after the leader goes away and the standby takes over. Use reported to the standby reaches the
// leader; key usage is stored by the leader only (a standby refuses it, naming the leader).
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { RouterServiceClient } from '@llmgw/proto';
import { openStore } from '@llmgw/store';
import { freePort, testBackends, testChannelCredentials, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, TEST_JOIN_TOKEN, TEST_ROUTER_TOKEN, WITH_TOKENS, type TestController } from './test/controller.harness';

/** `authorization: Bearer` with the controllers' router token. */
const routerToken = (): Metadata => {
  const md = new Metadata();
  md.set('authorization', `Bearer ${TEST_ROUTER_TOKEN}`);
  return md;
};

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Waits until `count()` has been exactly `n` for `holdMs` in a row. */
async function holdsAt(count: () => Promise<number> | number, n: number, holdMs: number, deadlineMs: number, message: string): Promise<void> {
  let since: number | undefined;
  await waitFor(
    async () => {
      const c = await count();
      if (c !== n) since = undefined;
      else since ??= Date.now();
      return since !== undefined && Date.now() - since >= holdMs;
    },
    { deadlineMs, intervalMs: 50, message },
  );
}

/** A controller on `dbUrl` that holds the lease 'controller' (3 s, renewed every second) to lead. */
function leaseEnv(dbUrl: string, catalogPath: string, port: number): Record<string, string> {
  return {
    LLMGW_DATABASE_URL: dbUrl,
    LLMGW_CONTROLLER_CATALOG_FILE: catalogPath,
    LLMGW_CONTROLLER_GRPC_PORT: String(port),
    LLMGW_CONTROLLER_ADVERTISE_ADDRESS: `127.0.0.1:${port}`,
    LLMGW_CONTROLLER_LEASE: 'controller',
    LLMGW_CONTROLLER_LEASE_TTL: '3s',
    LLMGW_CONTROLLER_LEASE_RENEW: '1s',
    LLMGW_CONTROLLER_SETTLE: '2s',
  };
}

/** What each controller logged and each agent saw, for a failure message. */
function story(controllers: TestController[], agents: FakeAgent[]): string {
  const t0 = Math.min(...controllers.flatMap((c) => c.logs.map((l) => Date.parse(String(l.time)))));
  return JSON.stringify({
    controllers: controllers.map((c) => ({ grpc: c.grpc, logs: c.logs.filter((l) => l.level !== 'debug' && l.level !== 'trace').map((l) => [Date.parse(String(l.time)) - t0, l.msg, l.nodeId ?? l.leader ?? '']) })),
    agents: agents.map((x) => ({
      node: x.options.nodeId,
      received: x.received.map((r) => [r.at - t0, r.controller, r.payload.$case]),
      ended: x.ended.map((e) => [e.at - t0, e.controller, e.code, e.details]),
    })),
  });
}

describe.each(testBackends())('two controllers on one $name store', (backend) => {
  it(
    'one leads, the standby sends agents to it, and a model wanting 2 replicas ends with exactly 2 — before and after failover',
    async () => {
      const db = await backend.create();
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
      cleanups.push(() => db.drop(), () => file.cleanup());
      const [pa, pb] = [await freePort(), await freePort()];
      const env = (port: number) => leaseEnv(db.url, file.path, port);
      // Both start at once: they race for the catalog seed and for the lease.
      const controllers: TestController[] = await Promise.all([startController({ ...WITH_TOKENS, ...env(pa) }), startController({ ...WITH_TOKENS, ...env(pb) })]);
      cleanups.push(...controllers.map((c) => () => c.close()));
      const [a, b] = controllers;
      const agents = [
        new FakeAgent({ nodeId: 'node-1', controllers: [a.grpc, b.grpc], token: TEST_JOIN_TOKEN }),
        new FakeAgent({ nodeId: 'node-2', controllers: [b.grpc, a.grpc], token: TEST_JOIN_TOKEN }),
        new FakeAgent({ nodeId: 'node-3', controllers: [b.grpc, a.grpc], token: TEST_JOIN_TOKEN }),
      ];
      cleanups.push(() => Promise.all(agents.map((x) => x.stop())));
      for (const x of agents) x.connect();

      const leader = await waitFor(() => controllers.find((c) => c.plane.leadership.isLeader()), { deadlineMs: 10_000, message: 'a leader' });
      const standby = leader === a ? b : a;
      expect(standby.plane.leadership.isLeader()).toBe(false);
      await waitFor(() => agents.every((x) => x.connectedTo === leader.grpc), { deadlineMs: 15_000, message: 'every agent on the leader' });
      // An agent that reaches the standby is told where the leader is, and joins nothing there.
      const probe = new FakeAgent({ nodeId: 'node-probe', controllers: [standby.grpc], token: TEST_JOIN_TOKEN });
      const answer = await probe.registerOnce(standby.grpc);
      expect(answer, story(controllers, agents)).toMatchObject({ messages: [{ $case: 'notLeader', value: { leaderAddress: leader.grpc } }], code: status.OK });
      // Agents that reached a controller while they started were sent to the leader, or, before
      // anyone led, told no address; never to anyone else.
      for (const r of agents.flatMap((x) => x.commands('notLeader'))) {
        const named = r.payload.$case === 'notLeader' ? r.payload.value.leaderAddress : undefined;
        if (named === undefined) continue;
        expect(named).toBe(leader.grpc);
        expect(r.controller).toBe(standby.grpc);
      }

      const store = await openStore(db.url);
      cleanups.push(() => store.close());
      const running = () => agents.reduce((n, x) => n + x.running().length, 0);
      await holdsAt(running, 2, 2_000, 30_000, 'exactly 2 replicas running');
      await holdsAt(async () => (await store.replicas.list()).length, 2, 500, 10_000, 'exactly 2 replica rows');
      expect(standby.plane.sessions.sent.startReplica).toBe(0);
      // The standby serves reads from the store: the same endpoints.
      await waitFor(() => standby.plane.publisher.current()?.endpoints.length === 2, { deadlineMs: 10_000, message: 'standby publishes the endpoints' });
      const before = agents.flatMap((x) => x.running()).sort();

      // A router watching the standby reports its use there; the leader learns it through the store.
      const usedAt = Date.now() - 1_000;
      const router = new RouterServiceClient(standby.grpc, testChannelCredentials());
      cleanups.push(() => router.close());
      await new Promise<void>((ok, fail) =>
        router.reportUsage({ keyUsage: [], routerId: 'router-on-standby', lastUsedUnixMs: { [before[0]]: usedAt } }, routerToken(), (e) => (e ? fail(e) : ok())),
      );
      expect(leader.plane.replicas.get(before[0])?.replica.lastUsedAt).toBeUndefined();
      await waitFor(() => leader.plane.replicas.get(before[0])?.replica.lastUsedAt === usedAt, {
        deadlineMs: 15_000,
        message: "the leader knowing the use reported to the standby",
      });
      expect(leader.plane.replicas.get(before[1])?.replica.lastUsedAt).toBeUndefined();

      // Key usage is the leader's to write: the standby refuses it (naming the leader) and stores
      // nothing, so the router keeps it; the same report to the leader is stored once.
      const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
      const keyed = { routerId: 'router-with-keys', lastUsedUnixMs: {}, keyUsage: [{ key: 'team-a', model: 'llama', hourUnixMs: hour, requests: 3, promptTokens: 30, completionTokens: 12 }] };
      const report = (to: RouterServiceClient) => new Promise<ServiceError | null>((done) => to.reportUsage(keyed, routerToken(), (e) => done(e)));
      const refused = await report(router);
      expect(refused?.code).toBe(status.FAILED_PRECONDITION);
      expect(refused?.details).toContain(leader.grpc);
      expect(await store.keyUsage.query(0)).toEqual([]);
      const toLeader = new RouterServiceClient(leader.grpc, testChannelCredentials());
      cleanups.push(() => toLeader.close());
      expect(await report(toLeader)).toBeNull();
      expect(await store.keyUsage.query(0)).toEqual([{ key: 'team-a', model: 'llama', hour, requests: 3, promptTokens: 30, completionTokens: 12 }]);

      // The leader goes away; the standby takes the lease, the agents follow, nothing churns.
      await leader.close();
      await waitFor(() => standby.plane.leadership.isLeader(), { deadlineMs: 10_000, message: 'standby took over' });
      await waitFor(() => agents.every((x) => x.connectedTo === standby.grpc), { deadlineMs: 15_000, message: 'agents followed' });
      await waitFor(() => standby.plane.phase === 'active', { deadlineMs: 10_000, message: 'new leader settled' });
      await holdsAt(running, 2, 1_500, 20_000, 'still exactly 2 replicas');
      expect(agents.flatMap((x) => x.running()).sort()).toEqual(before);
      expect((await store.replicas.list()).map((r) => r.id)).toEqual(before);
      // The new leader stores key usage; the old one's row and this one add up.
      expect(await report(router)).toBeNull();
      expect(await store.keyUsage.query(0)).toEqual([{ key: 'team-a', model: 'llama', hour, requests: 6, promptTokens: 60, completionTokens: 24 }]);
    },
    120_000,
  );
  it(
    'an agent admitted just before the lead is lost is sent on, not kept by a controller that commands nobody',
    async () => {
      const db = await backend.create();
      const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
      cleanups.push(() => db.drop(), () => file.cleanup());
      const controller = await startController({ ...WITH_TOKENS, ...leaseEnv(db.url, file.path, await freePort()) });
      cleanups.push(() => controller.close());
      await waitFor(() => controller.plane.leadership.isLeader(), { deadlineMs: 10_000, message: 'leading' });
      await controller.plane.whenLoaded();
      // The store answers this node's identity check only once the controller no longer leads.
      const { nodes, leases } = controller.plane.options.store;
      const credentialHash = nodes.credentialHash;
      let checking = false;
      let answer!: () => void;
      const lostLead = new Promise<void>((resolve) => (answer = resolve));
      nodes.credentialHash = async (id: string) => {
        if (id === 'node-late') {
          checking = true;
          await lostLead;
        }
        return credentialHash.call(nodes, id);
      };
      const agent = new FakeAgent({ nodeId: 'node-late', controllers: [controller.grpc], token: TEST_JOIN_TOKEN });
      cleanups.push(() => agent.stop());
      agent.connect();
      await waitFor(() => checking, { deadlineMs: 10_000, message: 'the identity check under way' });
      // Every renewal now fails as if another controller held the lease.
      const claim = leases.claim;
      leases.claim = async () => undefined;
      await waitFor(() => !controller.plane.leadership.isLeader() && controller.plane.phase === 'standby', { deadlineMs: 10_000, message: 'the lead lost' });
      answer();

      // The stream that was admitted is sent on as the streams closed at the loss were: NotLeader,
      // no Welcome (nothing the agent sends on one would be kept), and nothing of the node kept.
      await waitFor(() => agent.ended.length > 0, { deadlineMs: 10_000, message: 'the admitted stream ended' });
      expect(agent.received[0]?.payload.$case).toBe('notLeader');
      expect(agent.commands('welcome')).toEqual([]);
      expect(agent.ended[0]).toMatchObject({ controller: controller.grpc, code: status.OK });
      expect(controller.plane.sessions.get('node-late')).toBeUndefined();
      expect(controller.plane.nodes.get('node-late')).toBeUndefined();
      // The secret bound for that first join was released: the id is not left bound to a secret nobody holds.
      expect(await credentialHash.call(nodes, 'node-late')).toBeUndefined();

      // Leading again, the controller welcomes the agent (binding a secret at this first join).
      leases.claim = claim;
      await waitFor(() => agent.connectedTo === controller.grpc, { deadlineMs: 20_000, message: 'the agent welcomed by the leader again' });
      expect(agent.nodeSecret).toBeDefined();
      expect(controller.plane.sessions.get('node-late')).toBeDefined();
      expect(agent.ended.every((e) => e.code === status.OK)).toBe(true);
    },
    60_000,
  );
});
