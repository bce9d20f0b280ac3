// The admin API as a careless or hostile client meets it: every answer that is not a success is
// application/problem+json (malformed and oversized bodies, unknown routes and methods included),
// and `gc/collect` removes nothing unless the body says, as JSON, exactly where.
import { cacheName } from '@llmgw/catalog';
import { ErrorCode, HTTP_STATUS_OF } from '@llmgw/domain';
import { secretHash } from '@llmgw/observability';
import { openStore } from '@llmgw/store';
import { sqliteBackend, waitFor } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, type TestController } from './test/controller.harness';

const ADMIN = 'admin-token-0123456789';
const JOIN = 'join-token-0123456789';
const OLD_A = cacheName('hf://org/retired-a@main') as string;
const OLD_B = cacheName('hf://org/retired-b@main') as string;

describe('admin API errors and gc collect scope', () => {
  let controller: TestController;
  let cleanup: () => Promise<void>;
  let dbUrl: string;
  const agents: FakeAgent[] = [];

  const admin = (path: string, init: RequestInit = {}) =>
    fetch(`${controller.http}/v1/admin${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN}`, ...(init.headers ?? {}) } });
  const collect = (body: string, contentType: string | null = 'application/json') =>
    admin('/gc/collect', { method: 'POST', body, headers: contentType === null ? {} : { 'content-type': contentType } });
  const collectCommands = () => agents.flatMap((a) => a.commands('collectWeights'));
  const gcEntries = async () => ((await (await admin('/gc')).json()) as { nodes: { nodeId: string }[] }).nodes.map((n) => n.nodeId);

  /** Status, media type and parsed body of an answer that must be a problem document. */
  const problem = async (res: Response | Promise<Response>) => {
    const r = await res;
    const text = await r.text();
    expect(r.headers.get('content-type'), `${r.status} ${text}`).toBe('application/problem+json');
    const doc = JSON.parse(text) as { type: string; title: string; status: number; detail: string; code: string; problems?: { path: string }[] };
    expect(doc).toMatchObject({ type: expect.stringMatching(/^https:\/\/llmgw\.dev\/problems\//), title: expect.any(String), status: r.status, detail: expect.any(String), code: expect.any(String) });
    return doc;
  };

  beforeAll(async () => {
    const db = await sqliteBackend.create();
    dbUrl = db.url;
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 0 }]));
    controller = await startController({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_ADMIN_TOKEN: ADMIN,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN,
      LLMGW_CONTROLLER_SETTLE: '200ms',
    });
    for (const [nodeId, name] of [
      ['node-a', OLD_A],
      ['node-b', OLD_B],
    ] as const) {
      agents.push(new FakeAgent({ nodeId, controllers: [controller.grpc], token: JOIN, cacheEntries: [{ name, sizeBytes: 1_000, modifiedUnixMs: 1 }] }));
    }
    for (const a of agents) a.connect();
    cleanup = async () => {
      await Promise.all(agents.map((a) => a.stop()));
      await controller.close();
      await db.drop();
      file.cleanup();
    };
    await waitFor(async () => controller.plane.phase === 'active' && (await gcEntries()).length === 2, { deadlineMs: 20_000, message: 'both nodes listed by gc' });
  }, 60_000);

  afterAll(() => cleanup?.());

  it('answers malformed and oversized bodies, unknown routes and wrong methods as problem+json', async () => {
    const malformed = await problem(collect('{"nodes": ['));
    expect(malformed).toMatchObject({ status: 400, code: 'invalid_argument' });
    const huge = await problem(collect(JSON.stringify({ nodes: ['x'.repeat(200_000)] })));
    expect(huge).toMatchObject({ status: 413, code: 'invalid_argument' });
    const charset = await problem(collect('{}', 'application/json; charset=latin-9'));
    expect(charset).toMatchObject({ status: 415 });
    expect(await problem(admin('/no-such-thing'))).toMatchObject({ status: 404, code: 'not_found' });
    expect(await problem(fetch(`${controller.http}/nope`))).toMatchObject({ status: 404, code: 'not_found' });
    expect(await problem(admin('/status', { method: 'DELETE' }))).toMatchObject({ status: 404, code: 'not_found' });
    expect(await problem(admin('/gc/collect'))).toMatchObject({ status: 404, code: 'not_found' });
    expect(collectCommands()).toEqual([]);
  });

  it('refuses a collect whose body is not JSON (415) and one that names no scope (422 naming the field); nothing is collected', async () => {
    // What a plain fetch() sends: text/plain, so the body is never read.
    expect(await problem(collect('{"nodes": ["node-a"]}', 'text/plain;charset=UTF-8'))).toMatchObject({ status: 415 });
    expect(await problem(collect('', null))).toMatchObject({ status: 415 });
    for (const [body, path] of [
      ['{}', 'nodes'],
      ['{"nodes": []}', 'nodes'],
      ['{"nodes": "node-a"}', 'nodes'],
      ['{"nodes": ["node-a", 3]}', 'nodes[1]'],
      ['{"all": false}', 'all'],
      ['{"all": "yes"}', 'all'],
      ['{"all": true, "nodes": ["node-a"]}', 'all'],
      ['{"node": "node-a"}', 'node'],
      ['[]', ''],
    ] as const) {
      const doc = await problem(collect(body));
      expect(doc, body).toMatchObject({ status: 422, code: 'invalid_argument', problems: [{ path }] });
    }
    expect(collectCommands()).toEqual([]);
    expect(await gcEntries()).toEqual(['node-a', 'node-b']);
  });

  it('answers a domain code with the status and type every llmgw REST API gives it (the catalog API e2e holds the same)', async () => {
    const unauthenticated = await fetch(`${controller.http}/v1/admin/nodes`, { headers: { authorization: 'Bearer wrong-token-0123456789' } });
    expect(unauthenticated.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
    expect(await problem(unauthenticated)).toMatchObject({ status: HTTP_STATUS_OF[ErrorCode.Unauthenticated], code: 'unauthenticated', type: 'https://llmgw.dev/problems/unauthorized' });
    expect(await problem(admin('/nodes/no-such-node/cordon', { method: 'POST' }))).toMatchObject({
      status: HTTP_STATUS_OF[ErrorCode.NotFound],
      code: 'not_found',
      type: 'https://llmgw.dev/problems/not-found',
    });
  });

  it('takes stored admin tokens by scope: read reads, write changes, a revoked one is refused', async () => {
    const store = await openStore(dbUrl, { migrate: false });
    try {
      await store.adminTokens.create('viewer', ['read'], secretHash('viewer-secret-0123456789'));
      await store.adminTokens.create('operator', ['read', 'write'], secretHash('operator-secret-0123456789'));
      const as = (secret: string, path: string, method = 'GET') => fetch(`${controller.http}/v1/admin${path}`, { method, headers: { authorization: `Bearer ${secret}` } });
      expect((await as('viewer-secret-0123456789', '/status')).status).toBe(200);
      expect(await problem(as('viewer-secret-0123456789', '/nodes/node-a/cordon', 'POST'))).toMatchObject({ status: 403, code: 'permission_denied' });
      expect(((await (await as('operator-secret-0123456789', '/nodes/node-a/cordon', 'POST')).json()) as { node: unknown }).node).toMatchObject({ id: 'node-a', cordoned: true });
      expect((await as('operator-secret-0123456789', '/nodes/node-a/uncordon', 'POST')).status).toBe(200);
      await store.adminTokens.revoke('operator');
      expect(await problem(as('operator-secret-0123456789', '/status'))).toMatchObject({ status: 401, code: 'unauthenticated' });
    } finally {
      await store.close();
    }
  });

  it('an unknown node is a 404 and nothing is collected anywhere, even beside a known one', async () => {
    const doc = await problem(collect('{"nodes": ["node-a", "no-such-node"]}'));
    expect(doc).toMatchObject({ status: 404, code: 'not_found', problems: [{ path: 'nodes' }] });
    expect(doc.detail).toContain("'no-such-node'");
    expect(collectCommands()).toEqual([]);
    expect(await gcEntries()).toEqual(['node-a', 'node-b']);
  });

  it('collects on the named nodes only, and on every node with "all": true', async () => {
    const one = await admin('/gc/collect', { method: 'POST', body: '{"nodes": ["node-a"]}', headers: { 'content-type': 'application/json' } });
    expect(one.status).toBe(200);
    expect(await one.json()).toMatchObject({ nodes: [{ nodeId: 'node-a', asked: [OLD_A], results: [{ path: OLD_A, outcome: 'removed' }] }], removedBytes: 1_000 });
    expect(agents[1].commands('collectWeights')).toEqual([]);
    await waitFor(async () => (await gcEntries()).join() === 'node-b', { deadlineMs: 5_000, message: 'node-a collected' });

    const all = await admin('/gc/collect', { method: 'POST', body: '{"all": true}', headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(all.status).toBe(200);
    expect(await all.json()).toMatchObject({ nodes: [{ nodeId: 'node-b', asked: [OLD_B], results: [{ path: OLD_B, outcome: 'removed' }] }] });
  });
});
