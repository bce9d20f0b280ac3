// Two controllers behind one admin address, as a Kubernetes Service puts them: a change sent to
// the standby is carried out by the leader and answered with the leader's answer, errors
// included; reads are answered where they land and say which controller answered; a forwarded
// change never hops twice.
import { freePort, testBackends, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { FORWARDED_BY } from './admin/leader.forwarder';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, type TestController } from './test/controller.harness';

const ADMIN = 'admin-token-0123456789';
const JOIN = 'join-token-0123456789';
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe.each(testBackends())('admin changes sent to a standby, on $name', (backend) => {
  it('are carried out by the leader and answered with its answer; one hop at most', async () => {
    const db = await backend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 0 }]));
    cleanups.push(() => db.drop(), () => file.cleanup());
    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const env = (grpc: number, http: number) => ({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_GRPC_PORT: String(grpc),
      LLMGW_CONTROLLER_PORT: String(http),
      LLMGW_CONTROLLER_ADVERTISE_ADDRESS: `127.0.0.1:${grpc}`,
      LLMGW_CONTROLLER_ADMIN_TOKEN: ADMIN,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN,
      LLMGW_CONTROLLER_LEASE: 'controller',
      LLMGW_CONTROLLER_LEASE_TTL: '3s',
      LLMGW_CONTROLLER_LEASE_RENEW: '1s',
    });
    const controllers: TestController[] = await Promise.all([startController(env(ports[0], ports[1])), startController(env(ports[2], ports[3]))]);
    cleanups.push(...controllers.map((c) => () => c.close()));
    const agent = new FakeAgent({ nodeId: 'node-1', controllers: controllers.map((c) => c.grpc), token: JOIN });
    cleanups.push(() => agent.stop());
    agent.connect();
    await waitFor(() => controllers.some((c) => c.plane.leadership.isLeader() && c.plane.nodes.get('node-1') !== undefined), { deadlineMs: 20_000, message: 'a leader with node-1' });
    const leader = controllers.find((c) => c.plane.leadership.isLeader()) as TestController;
    const standby = controllers.find((c) => c !== leader) as TestController;
    const call = (c: TestController, path: string, init: RequestInit = {}) =>
      fetch(`${c.http}/v1/admin${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN}`, ...(init.headers ?? {}) } });

    const cordoned = await call(standby, '/nodes/node-1/cordon', { method: 'POST' });
    expect(cordoned.status).toBe(200);
    expect(((await cordoned.json()) as { node: unknown }).node).toMatchObject({ id: 'node-1', cordoned: true });
    expect(cordoned.headers.get('x-llmgw-controller')).toBe(`${standby.plane.controllerId} standby`);
    expect(leader.plane.nodes.get('node-1')?.info.cordoned).toBe(true);

    const read = await call(standby, '/status');
    expect(read.headers.get('x-llmgw-controller')).toBe(`${standby.plane.controllerId} standby`);
    expect(((await read.json()) as { controller: { leader: boolean; leaderAddress?: string } }).controller).toMatchObject({ leader: false, leaderAddress: leader.grpc });

    const missing = await call(standby, '/nodes/no-such-node/drain', { method: 'POST' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ type: 'https://llmgw.dev/problems/not-found', code: 'not_found', detail: "node 'no-such-node' is not known" });
    const badScope = await call(standby, '/gc/collect', { method: 'POST', body: '{"nodes": "node-1"}', headers: { 'content-type': 'application/json' } });
    expect(badScope.status).toBe(422);
    const collected = await call(standby, '/gc/collect', { method: 'POST', body: '{"all": true}', headers: { 'content-type': 'application/json' } });
    expect(collected.status).toBe(200);

    // The standby checks the credential itself; a change already forwarded once is not sent on.
    expect((await fetch(`${standby.http}/v1/admin/nodes/node-1/uncordon`, { method: 'POST', headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
    const hop = await call(standby, '/nodes/node-1/uncordon', { method: 'POST', headers: { [FORWARDED_BY]: 'another-standby' } });
    expect(hop.status).toBe(503);
    expect(hop.headers.get('retry-after')).toBe('1');
    expect(leader.plane.nodes.get('node-1')?.info.cordoned).toBe(true);
    expect((await call(standby, '/nodes/node-1/uncordon', { method: 'POST' })).status).toBe(200);
    expect(leader.plane.nodes.get('node-1')?.info.cordoned).toBe(false);
  }, 60_000);
});
