// The controller's gRPC port as a hostile client sees it (over TLS, as deployed): every method of every service it serves
// is refused without a token, with a wrong one, and with the other kind's token; garbage bytes and
// an HTTP/1.1 request on the port are turned away without harm; an oversized message is
// RESOURCE_EXHAUSTED; and 500 well-formed but nonsensical messages per method end in a client
// error or nothing, never INTERNAL, and change nothing the controller keeps.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client, Metadata, status, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import { ConnectRequest, ReportUsageRequest, WatchRequest } from '@llmgw/proto';
import { openStore, type Store } from '@llmgw/store';
import { sqliteBackend, testChannelCredentials, testGrpcTlsEnv, waitFor, type TestDatabase } from '@llmgw/testing';
import { grpcChannelCredentials, issueCertificate, pemPairFiles, readPemPair, writePemPair } from '@llmgw/tls';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogDoc, catalogFile, startController, type TestController } from '../test/controller.harness';
import { CALLER_OF_SERVICE } from './grpc-auth';
import { GRPC_MAX_RECEIVE_BYTES, GRPC_PACKAGE_DEFINITION } from './grpc.transport';

const JOIN = 'wire-join-token-0123456789abcdef';
const ROUTER = 'wire-router-token-0123456789abcdef';
const TOKEN_OF = { agent: JOIN, router: ROUTER } as const;

interface Method {
  readonly path: string;
  readonly service: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
}

/** Every method the port serves, from the service definitions Nest's transport is given. */
const METHODS: Method[] = Object.entries(GRPC_PACKAGE_DEFINITION).flatMap(([service, definition]) =>
  Object.values(definition as Record<string, { path: string; requestStream: boolean; responseStream: boolean }>).map((m) => ({
    path: m.path,
    service,
    requestStream: m.requestStream,
    responseStream: m.responseStream,
  })),
);

const passthrough = (b: Buffer): Buffer => b;

function bearer(token?: string): Metadata {
  const md = new Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  return md;
}

interface Outcome {
  readonly code: number;
  readonly details: string;
  readonly messages: number;
}

/** One call of any kind with `messages` (encoded) sent; resolves with its status once it ends, or after the first response when `cancelAfterFirst`. */
function call(client: Client, method: Method, metadata: Metadata, messages: Buffer[], cancelAfterFirst = false): Promise<Outcome> {
  const deadline = Date.now() + 20_000;
  return new Promise((resolve) => {
    if (!method.requestStream && !method.responseStream) {
      client.makeUnaryRequest(method.path, passthrough, passthrough, messages[0] ?? Buffer.alloc(0), metadata, { deadline }, (error: ServiceError | null) =>
        resolve({ code: error?.code ?? status.OK, details: error?.details ?? '', messages: error ? 0 : 1 }),
      );
      return;
    }
    let received = 0;
    const stream = method.requestStream
      ? client.makeBidiStreamRequest(method.path, passthrough, passthrough, metadata, { deadline })
      : client.makeServerStreamRequest(method.path, passthrough, passthrough, messages[0] ?? Buffer.alloc(0), metadata, { deadline });
    stream.on('data', () => {
      received += 1;
      if (cancelAfterFirst && received === 1) stream.cancel();
    });
    stream.on('error', () => undefined);
    stream.on('status', (s) => resolve({ code: s.code, details: s.details, messages: received }));
    if (method.requestStream) {
      const duplex = stream as unknown as { write(b: Buffer): void; end(): void };
      for (const m of messages) duplex.write(m);
      if (!cancelAfterFirst) duplex.end();
    }
  });
}

describe('the controller gRPC port against hostile clients', () => {
  let db: TestDatabase;
  let file: ReturnType<typeof catalogFile>;
  let controller: TestController;
  let client: Client;
  let store: Store;

  beforeAll(async () => {
    db = await sqliteBackend.create();
    file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    controller = await startController({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN,
      LLMGW_CONTROLLER_ROUTER_TOKEN: ROUTER,
      LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
      LLMGW_CONTROLLER_SETTLE: '200ms',
    });
    await controller.plane.whenLoaded();
    client = new Client(controller.grpc, testChannelCredentials(), { 'grpc.max_send_message_length': 64 * 1024 * 1024 });
    store = await openStore(db.url);
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await store?.close();
    await controller?.close();
    await db?.drop();
    file?.cleanup();
  });

  it('knows whose token every served service takes: the credential table and the service definitions name the same services', () => {
    expect(Object.keys(CALLER_OF_SERVICE).sort()).toEqual(Object.keys(GRPC_PACKAGE_DEFINITION).sort());
    expect(METHODS.map((m) => m.path).sort()).toEqual(['/llmgw.v1.AgentService/Connect', '/llmgw.v1.RouterService/ReportUsage', '/llmgw.v1.RouterService/Watch']);
  });

  it('refuses every method: no token and a wrong token UNAUTHENTICATED, the other kind of token PERMISSION_DENIED; the right token is let through', async () => {
    const table: { path: string; credential: string; code: number }[] = [];
    for (const m of METHODS) {
      const own = CALLER_OF_SERVICE[m.service];
      const other = own === 'agent' ? 'router' : 'agent';
      for (const [credential, md] of [
        ['none', bearer()],
        ['wrong', bearer('not-a-token-of-this-cluster-0123')],
        ['not bearer', (() => { const x = new Metadata(); x.set('authorization', `Basic ${TOKEN_OF[own]}`); return x; })()],
        [`${other} token`, bearer(TOKEN_OF[other])],
      ] as const) {
        const outcome = await call(client, m, md, [Buffer.alloc(0)]);
        table.push({ path: m.path, credential, code: outcome.code });
      }
      // With its own token the call reaches its handler (an empty message is then the handler's business, not the credential check's).
      const ok = await call(client, m, bearer(TOKEN_OF[own]), [Buffer.from(m.path.endsWith('/Connect') ? ConnectRequest.encode({}).finish() : [])], m.responseStream);
      expect([status.UNAUTHENTICATED, status.PERMISSION_DENIED]).not.toContain(ok.code);
    }
    const expected = METHODS.flatMap((m) => [
      { path: m.path, credential: 'none', code: status.UNAUTHENTICATED },
      { path: m.path, credential: 'wrong', code: status.UNAUTHENTICATED },
      { path: m.path, credential: 'not bearer', code: status.UNAUTHENTICATED },
      { path: m.path, credential: `${CALLER_OF_SERVICE[m.service] === 'agent' ? 'router' : 'agent'} token`, code: status.PERMISSION_DENIED },
    ]);
    expect(table).toEqual(expected);
    // An unknown method is refused too.
    const unknown = await call(client, { path: '/llmgw.v1.AdminService/Shutdown', service: 'llmgw.v1.AdminService', requestStream: false, responseStream: false }, bearer(ROUTER), []);
    expect([status.UNAUTHENTICATED, status.UNIMPLEMENTED]).toContain(unknown.code);
  }, 60_000);

  it('turns away garbage bytes and an HTTP/1.1 request on the port, and keeps serving', async () => {
    const [host, port] = controller.grpc.split(':');
    for (const payload of [Buffer.from('GET /v1/admin/status HTTP/1.1\r\nHost: x\r\n\r\n'), Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)), Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\u0000\u0000\u0004garbage')]) {
      const closed = await new Promise<boolean>((resolve) => {
        const socket = tcpConnect(Number(port), host, () => socket.write(payload));
        socket.on('error', () => resolve(true));
        socket.on('close', () => resolve(true));
        socket.setTimeout(10_000, () => {
          socket.destroy();
          resolve(false);
        });
        socket.resume();
      });
      expect(closed).toBe(true);
    }
    const report = METHODS.find((m) => m.path.endsWith('/ReportUsage'));
    const ok = await call(client, report as Method, bearer(ROUTER), [Buffer.from(ReportUsageRequest.encode({ routerId: 'after-garbage', lastUsedUnixMs: {}, keyUsage: [] }).finish())]);
    expect(ok.code).toBe(status.OK);
  }, 60_000);

  it('refuses a message over the receive limit with RESOURCE_EXHAUSTED, even with the token', async () => {
    const lastUsedUnixMs: Record<string, number> = {};
    for (let i = 0; i < Math.ceil((GRPC_MAX_RECEIVE_BYTES * 1.1) / 30); i++) lastUsedUnixMs[`replica-${i.toString(36).padStart(20, '0')}`] = 1;
    const body = Buffer.from(ReportUsageRequest.encode({ routerId: 'flood', lastUsedUnixMs, keyUsage: [] }).finish());
    expect(body.length).toBeGreaterThan(GRPC_MAX_RECEIVE_BYTES);
    const outcome = await call(client, METHODS.find((m) => m.path.endsWith('/ReportUsage')) as Method, bearer(ROUTER), [body]);
    expect(outcome.code).toBe(status.RESOURCE_EXHAUSTED);
  }, 60_000);

  it('answers 500 nonsensical messages per method with a client error or nothing, never INTERNAL, and keeps nothing of them', async () => {
    const before = { nodes: controller.plane.nodes.snapshot().size, replicas: JSON.stringify([...controller.plane.replicas.values()].map((r) => r.replica)) };
    const seed = 20261205;
    const text = fc.oneof(fc.constant(''), fc.string({ maxLength: 40 }), fc.string({ minLength: 129, maxLength: 300 }), fc.constantFrom('../../etc/passwd', '\u0000', 'node id with spaces', '💥'));
    const count = fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.constantFrom(0, 1, Number.MAX_SAFE_INTEGER, 2 ** 52 + 1));

    // Connect: a first message that is not a usable Register (another payload, none, or a Register whose node id or address is unusable).
    const firstMessages = fc.sample(
      fc.oneof(
        fc.record({ payload: fc.constant(undefined) }),
        fc.record({ heartbeat: fc.record({ replicas: fc.constant([]), gpus: fc.constant([]) }) }).map(() => ({ payload: { $case: 'heartbeat' as const, value: { gpus: [], replicas: [] } } })),
        fc.record({ replicaId: text, restarts: fc.nat() }).map((s) => ({ payload: { $case: 'replicaStatus' as const, value: { replicaId: s.replicaId, state: 0, lastLogLines: [], restarts: s.restarts } } })),
        fc.record({ commandId: text }).map((c) => ({ payload: { $case: 'commandResult' as const, value: { commandId: c.commandId, ok: true, message: '', paths: [] } } })),
        fc.record({ nodeId: text.filter((t) => !/^[A-Za-z0-9._:-]{1,128}$/.test(t)), address: text, cpuCores: fc.nat() }).map((r) => ({
          payload: { $case: 'register' as const, value: { nodeId: r.nodeId, address: r.address, labels: {}, gpus: [], cpuCores: r.cpuCores, memoryBytes: 1, replicas: [], agentVersion: 'fuzz' } },
        })),
      ),
      { numRuns: 500, seed },
    );
    const connect = METHODS.find((m) => m.path.endsWith('/Connect')) as Method;
    const connectCodes = new Map<number, number>();
    for (let i = 0; i < firstMessages.length; i += 25) {
      const batch = firstMessages.slice(i, i + 25);
      const outcomes = await Promise.all(batch.map((m) => call(client, connect, bearer(JOIN), [Buffer.from(ConnectRequest.encode(ConnectRequest.fromPartial(m as ConnectRequest)).finish())])));
      for (const o of outcomes) connectCodes.set(o.code, (connectCodes.get(o.code) ?? 0) + 1);
    }
    expect([...connectCodes.keys()]).toEqual([status.INVALID_ARGUMENT]);

    // Watch: any router id and flag is served a snapshot (or nothing) and leaves no watcher behind once it goes.
    const watch = METHODS.find((m) => m.path.endsWith('/Watch')) as Method;
    const watches = fc.sample(fc.record({ routerId: text, acceptCompressed: fc.boolean() }), { numRuns: 500, seed });
    const watchCodes = new Map<number, number>();
    for (let i = 0; i < watches.length; i += 25) {
      const outcomes = await Promise.all(watches.slice(i, i + 25).map((w) => call(client, watch, bearer(ROUTER), [Buffer.from(WatchRequest.encode(w).finish())], true)));
      for (const o of outcomes) watchCodes.set(o.code, (watchCodes.get(o.code) ?? 0) + 1);
    }
    expect([...watchCodes.keys()]).toEqual([status.CANCELLED]);
    await waitFor(() => controller.plane.publisher.sinkCount === 0, { deadlineMs: 10_000, message: 'every fuzz watcher detached' });

    // ReportUsage: last-used times for replicas nobody has and key usage that makes no sense are dropped.
    const report = METHODS.find((m) => m.path.endsWith('/ReportUsage')) as Method;
    const reports = fc.sample(
      fc.record({
        routerId: text,
        lastUsedUnixMs: fc.dictionary(text, count, { maxKeys: 5 }),
        keyUsage: fc.array(
          fc.record({ key: text, model: text, hourUnixMs: count, requests: fc.constant(0), promptTokens: count, completionTokens: count }),
          { maxLength: 3 },
        ),
      }),
      { numRuns: 500, seed },
    );
    const reportCodes = new Map<number, number>();
    for (let i = 0; i < reports.length; i += 25) {
      const outcomes = await Promise.all(reports.slice(i, i + 25).map((r) => call(client, report, bearer(ROUTER), [Buffer.from(ReportUsageRequest.encode(ReportUsageRequest.fromPartial(r)).finish())])));
      for (const o of outcomes) reportCodes.set(o.code, (reportCodes.get(o.code) ?? 0) + 1);
    }
    expect([...reportCodes.keys()].filter((c) => c !== status.OK && c !== status.INVALID_ARGUMENT)).toEqual([]);

    // Nothing was kept: no node joined, no replica changed, no key usage was stored.
    expect(controller.plane.nodes.snapshot().size).toBe(before.nodes);
    expect(JSON.stringify([...controller.plane.replicas.values()].map((r) => r.replica))).toBe(before.replicas);
    expect(await store.keyUsage.query(0)).toEqual([]);
    expect(controller.logs.filter((l) => l.msg === 'gRPC call failed' || l.msg === 'agent message failed')).toEqual([]);
  }, 180_000);

  it('never writes either token to its log, whatever was sent', () => {
    expect(controller.logs.filter((l) => l.msg === 'gRPC call refused: missing or wrong token').length).toBeGreaterThan(10);
    const text = JSON.stringify(controller.logs);
    expect(text).not.toContain(JOIN);
    expect(text).not.toContain(ROUTER);
  });
});

describe('the controller gRPC port is TLS, and with client auth every caller shows a certificate naming who it claims to be', () => {
  let db: TestDatabase;
  let file: ReturnType<typeof catalogFile>;
  let controller: TestController;
  let certs: string;
  const clients: Client[] = [];

  /** Client credentials with a certificate issued by the test CA for `name`, or none. */
  const withCertificate = (name?: string): ChannelCredentials => {
    const tls = testGrpcTlsEnv();
    return grpcChannelCredentials({
      insecure: false,
      caFile: tls.LLMGW_GRPC_TLS_CA,
      ...(name !== undefined && pemPairFiles(certs, name)),
      clientAuth: false,
      refreshMs: 60_000,
    });
  };
  const clientOf = (credentials: ChannelCredentials): Client => {
    const c = new Client(controller.grpc, credentials);
    clients.push(c);
    return c;
  };
  const byPath = (suffix: string): Method => METHODS.find((m) => m.path.endsWith(suffix)) as Method;

  beforeAll(async () => {
    db = await sqliteBackend.create();
    file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    const tls = testGrpcTlsEnv();
    certs = mkdtempSync(join(tmpdir(), 'llmgw-wire-certs-'));
    const ca = readPemPair(dirname(tls.LLMGW_GRPC_TLS_CA), 'ca');
    for (const name of ['node-a', 'router-1']) writePemPair(certs, name, await issueCertificate(ca, { commonName: name, usage: 'client', now: new Date() }));
    controller = await startController({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN,
      LLMGW_CONTROLLER_ROUTER_TOKEN: ROUTER,
      LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
      LLMGW_CONTROLLER_SETTLE: '200ms',
      LLMGW_GRPC_TLS_CLIENT_AUTH: 'true',
    });
    await controller.plane.whenLoaded();
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    await controller?.close();
    await db?.drop();
    file?.cleanup();
    rmSync(certs, { recursive: true, force: true });
  });

  const usage = (routerId: string): Buffer[] => [Buffer.from(ReportUsageRequest.encode({ routerId, lastUsedUnixMs: {}, keyUsage: [] }).finish())];
  const register = (nodeId: string): Buffer[] => [
    Buffer.from(ConnectRequest.encode({ payload: { $case: 'register', value: { nodeId, address: '10.0.0.9', labels: {}, gpus: [], cpuCores: 1, memoryBytes: 1, replicas: [], agentVersion: 'wire' } } }).finish()),
  ];

  it('refuses a plaintext client and a client without a certificate before any call reaches a handler', async () => {
    for (const credentials of [grpcChannelCredentials({ insecure: true, clientAuth: false, refreshMs: 60_000 }), withCertificate()]) {
      const outcome = await call(clientOf(credentials), byPath('/ReportUsage'), bearer(ROUTER), usage('router-1'));
      expect(outcome.code).toBe(status.UNAVAILABLE);
    }
    expect(controller.logs.filter((l) => l.context === 'RouterService')).toEqual([]);
  });

  it('takes a node whose certificate names it, and refuses one posing as another node', async () => {
    const agent = clientOf(withCertificate('node-a'));
    const posing = await call(agent, byPath('/Connect'), bearer(JOIN), register('node-b'));
    expect(posing).toMatchObject({ code: status.PERMISSION_DENIED, details: expect.stringContaining('not node id node-b') });
    expect(controller.plane.nodes.get('node-b')).toBeUndefined();
    const own = await call(agent, byPath('/Connect'), bearer(JOIN), register('node-a'), true);
    expect(own).toMatchObject({ code: status.CANCELLED, messages: 1 });
  });

  it('takes a router whose certificate names it, and refuses one claiming another router id', async () => {
    const router = clientOf(withCertificate('router-1'));
    expect((await call(router, byPath('/ReportUsage'), bearer(ROUTER), usage('router-1'))).code).toBe(status.OK);
    const denied = await call(router, byPath('/ReportUsage'), bearer(ROUTER), usage('router-2'));
    expect(denied).toMatchObject({ code: status.PERMISSION_DENIED, details: expect.stringContaining('not router id router-2') });
    const watchAs = (routerId: string): Promise<Outcome> => call(router, byPath('/Watch'), bearer(ROUTER), [Buffer.from(WatchRequest.encode({ routerId, acceptCompressed: true }).finish())], true);
    expect(await watchAs('router-1')).toMatchObject({ code: status.CANCELLED, messages: 1 });
    expect((await watchAs('router-2')).code).toBe(status.PERMISSION_DENIED);
    // A node's certificate with the router token is still the router token's caller, and must name the router it claims.
    expect((await call(clientOf(withCertificate('node-a')), byPath('/ReportUsage'), bearer(ROUTER), usage('router-1'))).code).toBe(status.PERMISSION_DENIED);
  });
});

describe('plaintext gRPC only when asked for by name', () => {
  it('LLMGW_GRPC_INSECURE=true serves plaintext, warns at start and says so in /readyz; a TLS client is refused', async () => {
    const db = await sqliteBackend.create();
    const file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    const controller = await startController({ LLMGW_DATABASE_URL: db.url, LLMGW_CONTROLLER_CATALOG_FILE: file.path, LLMGW_GRPC_INSECURE: 'true', LLMGW_CONTROLLER_SETTLE: '200ms' });
    const plain = new Client(controller.grpc, grpcChannelCredentials({ insecure: true, clientAuth: false, refreshMs: 60_000 }));
    const tls = new Client(controller.grpc, testChannelCredentials());
    try {
      expect(controller.logs.filter((l) => l.level === 'warn' && String(l.msg).startsWith('LLMGW_GRPC_INSECURE'))).toHaveLength(1);
      expect(controller.logs.find((l) => String(l.msg).startsWith('llmgw-controller gRPC listening'))).toMatchObject({ security: 'plaintext' });
      const ready = (await (await fetch(`${controller.http}/readyz`)).json()) as { checks: Record<string, unknown> };
      expect(ready.checks.grpc).toEqual({ ready: true, detail: { security: 'plaintext', warning: 'plaintext on purpose (LLMGW_GRPC_INSECURE=true)' } });
      const report = METHODS.find((m) => m.path.endsWith('/ReportUsage')) as Method;
      const usage = [Buffer.from(ReportUsageRequest.encode({ routerId: 'plain', lastUsedUnixMs: {}, keyUsage: [] }).finish())];
      expect((await call(plain, report, bearer(), usage)).code).toBe(status.OK);
      expect((await call(tls, report, bearer(), usage)).code).toBe(status.UNAVAILABLE);
    } finally {
      plain.close();
      tls.close();
      await controller.close();
      await db.drop();
      file.cleanup();
    }
  }, 60_000);
});
