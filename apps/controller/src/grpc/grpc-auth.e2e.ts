// The gRPC port's tokens are checked from the call's head, before a request message is read:
// without the check there, a client with no token could send a 56 MB ReportUsage (or Register)
// and the controller decoded all of it before refusing it, blocking its event loop for seconds
// (heartbeats stalled, nodes turned unreachable). A call with no token, or a wrong one, gets
// UNAUTHENTICATED and its message is never decoded; a call with the token is served as before.
import { Client, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { ConnectRequest, ReportUsageRequest } from '@llmgw/proto';
import { sqliteBackend, testChannelCredentials, type TestDatabase } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { catalogDoc, catalogFile, startController, type TestController } from '../test/controller.harness';

const JOIN_TOKEN = 'grpc-auth-join-token-0123456789';
const ROUTER_TOKEN = 'grpc-auth-router-token-0123456789';

/** A ReportUsage of about `mb` MB (unique replica ids), already encoded. */
function bigUsage(mb: number): Buffer {
  const lastUsedUnixMs: Record<string, number> = {};
  for (let i = 0; i < mb * 28_500; i++) lastUsedUnixMs[`replica-${i.toString(36).padStart(16, '0')}`] = 1_700_000_000_000 + i;
  return Buffer.from(ReportUsageRequest.encode({ keyUsage: [], routerId: 'flooder', lastUsedUnixMs }).finish());
}

/** A Connect first message (Register) of about `mb` MB of labels, already encoded. */
function bigRegister(mb: number): Buffer {
  const labels: Record<string, string> = {};
  for (let i = 0; i < mb * 30_000; i++) labels[`label-${i}`] = 'x'.repeat(16);
  return Buffer.from(
    ConnectRequest.encode({
      payload: { $case: 'register', value: { nodeId: 'flood-node', address: '10.9.9.9', labels, gpus: [], cpuCores: 1, memoryBytes: 1, replicas: [], agentVersion: 'x' } },
    }).finish(),
  );
}

function bearer(token?: string): Metadata {
  const md = new Metadata();
  if (token !== undefined) md.set('authorization', `Bearer ${token}`);
  return md;
}

describe('gRPC tokens are checked before a request message is read', () => {
  let db: TestDatabase;
  let file: ReturnType<typeof catalogFile>;
  let controller: TestController;
  let client: Client;

  beforeAll(async () => {
    db = await sqliteBackend.create();
    file = catalogFile(catalogDoc([{ name: 'llama', replicas: 1 }]));
    controller = await startController({
      LLMGW_DATABASE_URL: db.url,
      LLMGW_CONTROLLER_CATALOG_FILE: file.path,
      LLMGW_CONTROLLER_JOIN_TOKEN: JOIN_TOKEN,
      LLMGW_CONTROLLER_ROUTER_TOKEN: ROUTER_TOKEN,
      LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
      LLMGW_CONTROLLER_SETTLE: '200ms',
    });
    client = new Client(controller.grpc, testChannelCredentials(), { 'grpc.max_send_message_length': 100 * 1024 * 1024 });
  }, 60_000);

  afterAll(async () => {
    client?.close();
    await controller?.close();
    await db?.drop();
    file?.cleanup();
  });

  const passthrough = (b: Buffer): Buffer => b;

  it('ReportUsage: an 8 MB report without the router token, or with the join token, is refused without being decoded', async () => {
    const body = bigUsage(8);
    expect(body.length).toBeGreaterThan(7_500_000);
    const decode = vi.spyOn(ReportUsageRequest, 'decode');
    try {
      const report = (md: Metadata): Promise<ServiceError | null> =>
        new Promise((resolve) => client.makeUnaryRequest('/llmgw.v1.RouterService/ReportUsage', passthrough, passthrough, body, md, { deadline: Date.now() + 30_000 }, (e) => resolve(e)));
      for (const md of [bearer(), bearer('not-the-router-token-0123')]) {
        expect(await report(md)).toMatchObject({ code: status.UNAUTHENTICATED, details: expect.stringContaining('router token') });
      }
      // The agents' token is a known credential of the wrong kind.
      expect(await report(bearer(JOIN_TOKEN))).toMatchObject({ code: status.PERMISSION_DENIED, details: expect.stringContaining('router token') });
      expect(decode).not.toHaveBeenCalled();
      // With the token, a small report is read and answered.
      const small = Buffer.from(ReportUsageRequest.encode({ keyUsage: [], routerId: 'real', lastUsedUnixMs: { r: Date.now() } }).finish());
      const ok = await new Promise<ServiceError | null>((resolve) =>
        client.makeUnaryRequest('/llmgw.v1.RouterService/ReportUsage', passthrough, passthrough, small, bearer(ROUTER_TOKEN), { deadline: Date.now() + 10_000 }, (e) => resolve(e)),
      );
      expect(ok).toBeNull();
      expect(decode).toHaveBeenCalledTimes(1);
    } finally {
      decode.mockRestore();
    }
    const refused = controller.logs.filter((l) => l.msg === 'gRPC call refused: missing or wrong token');
    expect(refused.map((l) => l.method)).toEqual(Array(3).fill('/llmgw.v1.RouterService/ReportUsage'));
    expect(JSON.stringify(controller.logs)).not.toContain(ROUTER_TOKEN);
  }, 60_000);

  it('AgentService.Connect: a 16 MB Register without the join token, or with the router token, is refused without being decoded; nothing about the node is kept', async () => {
    const register = bigRegister(16);
    expect(register.length).toBeGreaterThan(15_000_000);
    const decode = vi.spyOn(ConnectRequest, 'decode');
    try {
      for (const [md, code] of [
        [bearer(), status.UNAUTHENTICATED],
        [bearer('not-the-join-token-0123456'), status.UNAUTHENTICATED],
        [bearer(ROUTER_TOKEN), status.PERMISSION_DENIED],
      ] as const) {
        const call = client.makeBidiStreamRequest('/llmgw.v1.AgentService/Connect', passthrough, passthrough, md, { deadline: Date.now() + 30_000 });
        const outcome = await new Promise<{ code: number; details: string; messages: number }>((resolve) => {
          let messages = 0;
          call.on('data', () => (messages += 1));
          call.on('error', () => undefined);
          call.on('status', (s) => resolve({ code: s.code, details: s.details, messages }));
          call.write(register);
        });
        expect(outcome).toEqual({ code, details: expect.stringContaining('join token'), messages: 0 });
      }
      expect(decode).not.toHaveBeenCalled();
    } finally {
      decode.mockRestore();
    }
    expect(controller.plane.nodes.get('flood-node')).toBeUndefined();
    expect(await controller.plane.authenticate('flood-node', undefined)).toMatchObject({ ok: true, issued: expect.any(String) });
  }, 60_000);
});
