// The controller's HTTP side over a small fleet: cluster metrics computed at scrape time (through
// promtool), the admin API with its token and problem+json errors, gc that lists and collects
// only what llmgw fetched, cordon and drain; and the agents' join token.
import { cacheName } from '@llmgw/catalog';
import { RouterServiceClient } from '@llmgw/proto';
import { promtoolCheckMetrics, sqliteBackend, testChannelCredentials, waitFor } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeAgent } from './test/agent.fake';
import { catalogDoc, catalogFile, startController, type TestController } from './test/controller.harness';

const ADMIN = 'admin-token-0123456789';
const JOIN = 'join-token-0123456789';
const OLD = cacheName('hf://org/retired@main') as string;
const WANTED = cacheName('hf://org/llama@main') as string;

describe('metrics, admin API and tokens', () => {
  let controller: TestController;
  let cleanup: () => Promise<void>;
  const agents: FakeAgent[] = [];

  const admin = (path: string, init: RequestInit = {}, token: string | null = ADMIN) =>
    fetch(`${controller.http}/v1/admin${path}`, { ...init, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json', ...(init.headers ?? {}) } });

  /** The body as parsed JSON (loosely typed: the assertions check its shape). */
  const body = async (res: Response | Promise<Response>) => JSON.parse(await (await res).text());

  beforeAll(async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    controller = await startController({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_ADMIN_TOKEN: ADMIN,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN,
      LLMGW_CONTROLLER_SETTLE: '500ms',
    });
    agents.push(
      new FakeAgent({ nodeId: 'node-1', controllers: [controller.grpc], token: JOIN, unhealthyGpus: [7], fabric: 'ib-a' }),
      new FakeAgent({
        nodeId: 'node-2',
        controllers: [controller.grpc],
        token: JOIN,
        reportsUtilization: false,
        fabric: 'ib-a',
        cacheEntries: [
          { name: OLD, sizeBytes: 5_000, modifiedUnixMs: 1 },
          { name: WANTED, sizeBytes: 7_000, modifiedUnixMs: 1 },
          { name: 'copied-by-hand.gguf', sizeBytes: 9_000, modifiedUnixMs: 1 },
        ],
      }),
    );
    for (const a of agents) a.connect();
    cleanup = async () => {
      await Promise.all(agents.map((a) => a.stop()));
      await controller.close();
      await db.drop();
      file.cleanup();
    };
    await waitFor(() => [...controller.plane.replicas.values()].some((r) => r.replica.state === 'ready'), { deadlineMs: 20_000, message: 'a ready replica' });
  }, 60_000);

  afterAll(() => cleanup?.());

  it('refuses an agent with a wrong join token (UNAUTHENTICATED), and takes the right one', async () => {
    const intruder = new FakeAgent({ nodeId: 'intruder', controllers: [controller.grpc], token: 'wrong-token-0123456789' });
    intruder.connect();
    try {
      await waitFor(() => intruder.lastError, { deadlineMs: 5_000, message: 'refused' });
      expect(intruder.lastError).toMatchObject({ code: 16, details: expect.stringContaining('join token') });
      expect(controller.plane.nodes.get('intruder')).toBeUndefined();
      expect(agents.every((a) => a.welcomes > 0)).toBe(true);
    } finally {
      await intruder.stop();
    }
  });

  it('/metrics passes promtool; no utilisation sample where none was reported; an unhealthy GPU is neither used nor free', async () => {
    const text = await (await fetch(`${controller.http}/metrics`)).text();
    expect(promtoolCheckMetrics(text)).toEqual({ status: 0, output: '' });
    const sample = (line: string) => text.split('\n').find((l) => l.startsWith(line));
    expect(text).toMatch(/^llmgw_cluster_gpu_utilization_ratio\{node="node-1",gpu="0",gpu_class="H100-80GB"\} 0\.03$/m);
    expect(text).not.toMatch(/^llmgw_cluster_gpu_utilization_ratio\{node="node-2"/m);
    expect(text).toMatch(/^llmgw_cluster_gpu_memory_total_bytes\{node="node-2",gpu="0",gpu_class="H100-80GB"\} 80000000000$/m);
    expect(sample('llmgw_cluster_gpus{gpu_class="H100-80GB",state="unhealthy"}')).toMatch(/ 1$/);
    expect(sample('llmgw_cluster_gpus{gpu_class="H100-80GB",state="used"}')).toMatch(/ 1$/);
    expect(sample('llmgw_cluster_gpus{gpu_class="H100-80GB",state="free"}')).toMatch(/ 14$/);
    expect(sample('llmgw_cluster_nodes{state="healthy"}')).toMatch(/ 2$/);
    // node-1 holds the replica (bin-packing onto its 7 healthy GPUs); node-2 is whole and free.
    expect(sample('llmgw_cluster_fabric_free_nodes{fabric="ib-a"}')).toMatch(/ 1$/);
    expect(sample('llmgw_cluster_replicas{model="llama",state="ready"}')).toMatch(/ 1$/);
    expect(sample('llmgw_controller_leader')).toMatch(/ 1$/);
    expect(text).toContain('llmgw_controller_reconcile_duration_seconds_bucket');
    expect(text).toContain('process_cpu_seconds_total');
    // Nobody reported usage yet: unknown, so no idle sample at all.
    expect(text).not.toContain('llmgw_cluster_replica_idle_seconds{');
  });

  it('ReportUsage makes a replica\'s idleness known (newest time wins; 0 ignored)', async () => {
    const replica = [...controller.plane.replicas.values()][0].replica.id;
    const client = new RouterServiceClient(controller.grpc, testChannelCredentials());
    const report = (at: number) =>
      new Promise<void>((ok, fail) => client.reportUsage({ keyUsage: [], routerId: 'r1', lastUsedUnixMs: { [replica]: at, other: 0 } }, (e) => (e ? fail(e) : ok())));
    const newer = Date.now() - 10_000;
    await report(newer);
    await report(newer - 50_000);
    client.close();
    expect(controller.plane.replicas.get(replica)?.replica.lastUsedAt).toBe(newer);
    const text = await (await fetch(`${controller.http}/metrics`)).text();
    const idle = Number(/^llmgw_cluster_replica_idle_seconds\{model="llama",replica="[^"]+"\} (\S+)$/m.exec(text)?.[1]);
    expect(idle).toBeGreaterThanOrEqual(10);
    const status = await body(admin('/status'));
    expect(status.idle).toEqual({ replicas: [expect.objectContaining({ replicaId: replica, lastUsedAt: newer })], unknown: 0 });
  });

  it('the admin API wants its token and answers errors as problem+json', async () => {
    const noToken = await admin('/status', {}, null);
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get('content-type')).toBe('application/problem+json');
    expect(noToken.headers.get('www-authenticate')).toContain('Bearer');
    expect(await body(noToken)).toMatchObject({ status: 401, code: 'unauthenticated' });
    expect((await admin('/status', {}, 'wrong-token-0123456789')).status).toBe(401);

    const bad = await admin('/events?limit=abc&before=0');
    expect(bad.status).toBe(400);
    expect(await body(bad)).toMatchObject({ code: 'invalid_argument', problems: [{ path: 'before' }, { path: 'limit' }] });
    const unknown = await admin('/nodes/nope/cordon', { method: 'POST' });
    expect(unknown.status).toBe(404);
    expect(await body(unknown)).toMatchObject({ code: 'not_found', detail: "node 'nope' is not known" });
  });

  it('status, nodes, replicas and events describe the fleet', async () => {
    const status = await body(admin('/status'));
    expect(status).toMatchObject({
      controller: { leader: true, phase: 'active', catalogRevision: 1 },
      nodes: { total: 2, healthy: 2, unreachable: 0, lost: 0, cordoned: 0 },
      capacity: [{ gpuClass: 'H100-80GB', total: 16, used: 1, free: 14, unhealthy: 1, unavailable: 0 }],
      fabrics: [{ fabric: 'ib-a', nodes: 2, freeNodes: 1 }],
      replicas: { total: 1, byState: { ready: 1 } },
      models: { total: 1, satisfied: 1, unplaceable: 0 },
      unplaceable: [],
    });
    const { nodes } = await body(admin('/nodes'));
    expect(nodes.map((n: { id: string }) => n.id)).toEqual(['node-1', 'node-2']);
    const n2 = nodes[1];
    expect(n2.gpus[0]).not.toHaveProperty('utilizationPct');
    expect(nodes[0].gpus[0].utilizationPct).toBe(3);
    const { replicas } = await body(admin('/replicas?model=llama'));
    expect(replicas).toHaveLength(1);
    expect(replicas[0]).toMatchObject({ model: 'llama', state: 'ready', engine: 'vllm', url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) });
    expect((await body(admin('/replicas?model=other'))).replicas).toEqual([]);
    const { events } = await body(admin('/events?model=llama'));
    expect(events.map((e: { kind: string }) => e.kind)).toContain('placed');
  });

  it('gc lists per node only cache-named entries no model wants, and collect reports what each agent did', async () => {
    const plan = await body(admin('/gc'));
    expect(plan).toEqual({
      catalogRevision: 1,
      nodes: [{ nodeId: 'node-2', connected: true, entries: [{ name: OLD, sizeBytes: 5_000, modifiedAt: 1 }], totalBytes: 5_000 }],
      totalBytes: 5_000,
    });
    const collect = await admin('/gc/collect', { method: 'POST', body: '{"all": true}' });
    expect(collect.status).toBe(200);
    expect(await body(collect)).toEqual({
      catalogRevision: 1,
      nodes: [{ nodeId: 'node-2', asked: [OLD], results: [{ path: OLD, outcome: 'removed' }] }],
      removedBytes: 5_000,
    });
    await waitFor(async () => (await body(admin('/gc'))).nodes.length === 0, { deadlineMs: 5_000, message: 'nothing left to collect' });
    const bad = await admin('/gc/collect', { method: 'POST', body: '{"nodes": "node-2"}' });
    expect(bad.status).toBe(422);
  });

  it('cordon keeps new replicas off a node, drain moves its replicas away, uncordon ends both', async () => {
    const holder = [...controller.plane.replicas.values()][0].replica.members[0].nodeId;
    const other = holder === 'node-1' ? 'node-2' : 'node-1';
    const cordoned = await admin(`/nodes/${other}/cordon`, { method: 'POST' });
    expect(cordoned.status).toBe(200);
    expect((await body(cordoned)).node).toMatchObject({ id: other, cordoned: true, draining: false });
    await admin(`/nodes/${other}/uncordon`, { method: 'POST' });

    const drained = await body(admin(`/nodes/${holder}/drain`, { method: 'POST' }));
    expect(drained.node).toMatchObject({ id: holder, cordoned: true, draining: true });
    await waitFor(
      () => {
        const all = [...controller.plane.replicas.values()];
        return all.length === 1 && all[0].replica.state === 'ready' && all[0].replica.members[0].nodeId === other;
      },
      { deadlineMs: 20_000, message: 'replica moved off the drained node' },
    );
    const { events } = await body(admin(`/events?node=${holder}`));
    expect(events.map((e: { kind: string }) => e.kind)).toEqual(expect.arrayContaining(['cordoned', 'evicted']));
    const uncordoned = await body(admin(`/nodes/${holder}/uncordon`, { method: 'POST' }));
    expect(uncordoned.node).toMatchObject({ cordoned: false, draining: false });
  });
});
