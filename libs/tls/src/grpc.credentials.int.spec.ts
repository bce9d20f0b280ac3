import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  makeGenericClientConstructor,
  Server,
  status,
  type ChannelCredentials,
  type Client,
  type ServerCredentials,
  type ServerUnaryCall,
  type ServiceDefinition,
  type sendUnaryData,
} from '@grpc/grpc-js';
import type { GrpcTransportConfig } from '@llmgw/config';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateCa, issueCertificate, type PemPair } from './certificate.factory';
import { CertificateFileWatcher, grpcChannelCredentials, grpcServerCredentials } from './grpc.credentials';
import { certificateIdentity } from './peer-identity';
import { writePemPair } from './pem-pair.files';

// A real grpc-js server and client on 127.0.0.1 with a one-method service that answers with what
// the server saw of the connection: the transport security and the client certificate's identity.
const identity = (b: Buffer): Buffer => b;
const definition: ServiceDefinition = {
  whoAmI: {
    path: '/llmgw.test.Tls/WhoAmI',
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
    originalName: 'whoAmI',
  },
};
const TlsClient = makeGenericClientConstructor(definition, 'Tls');

interface Seen {
  security: string | null;
  identity: string | null;
}
type Outcome = { ok: true; seen: Seen } | { ok: false; code: status };

const now = new Date();
const dir = mkdtempSync(join(tmpdir(), 'llmgw-tls-grpc-'));
const servers: Server[] = [];
const clients: Client[] = [];
let ca: PemPair;
let otherCa: PemPair;
let caFile: string;
let otherCaFile: string;
let server: { certFile: string; keyFile: string };
let client: { certFile: string; keyFile: string };
let otherClient: { certFile: string; keyFile: string };

beforeAll(async () => {
  ca = await generateCa({ now });
  otherCa = await generateCa({ commonName: 'someone else', now });
  caFile = writePemPair(dir, 'ca', ca).certFile;
  otherCaFile = writePemPair(dir, 'other-ca', otherCa).certFile;
  server = writePemPair(dir, 'server', await issueCertificate(ca, { commonName: 'controller', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], usage: 'server', now }));
  client = writePemPair(dir, 'gpu-node-1', await issueCertificate(ca, { commonName: 'gpu-node-1', usage: 'client', now }));
  otherClient = writePemPair(dir, 'intruder', await issueCertificate(otherCa, { commonName: 'gpu-node-1', usage: 'client', now }));
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) s.forceShutdown();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tls = (t: Partial<GrpcTransportConfig>): GrpcTransportConfig => ({ insecure: false, clientAuth: false, refreshMs: 60_000, ...t });

async function serve(credentials: ServerCredentials): Promise<string> {
  const s = new Server();
  s.addService(definition, {
    whoAmI: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      const auth = call.getAuthContext();
      const seen: Seen = { security: auth.transportSecurityType ?? null, identity: certificateIdentity(auth.sslPeerCertificate) ?? null };
      callback(null, Buffer.from(JSON.stringify(seen)));
    },
  });
  servers.push(s);
  const port = await new Promise<number>((resolve, reject) => s.bindAsync('127.0.0.1:0', credentials, (error, p) => (error ? reject(error) : resolve(p))));
  return `127.0.0.1:${port}`;
}

/** One call on a fresh channel of its own (no connection shared with earlier calls). */
function call(address: string, credentials: ChannelCredentials): Promise<Outcome> {
  const c = new TlsClient(address, credentials, { 'grpc.use_local_subchannel_pool': 1 });
  clients.push(c);
  return new Promise((resolve) => {
    c.makeUnaryRequest<Buffer, Buffer>(definition.whoAmI.path, identity, identity, Buffer.alloc(0), { deadline: Date.now() + 5_000 }, (error, reply) => {
      resolve(error ? { ok: false, code: error.code } : { ok: true, seen: JSON.parse(reply!.toString()) as Seen });
    });
  });
}

/** Calls until `done` holds for an outcome, on a fresh channel each time; fails after `deadlineMs`. */
async function callUntil(address: string, credentials: () => ChannelCredentials, done: (o: Outcome) => boolean, deadlineMs = 15_000): Promise<Outcome> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const outcome = await call(address, credentials());
    if (done(outcome) || Date.now() > end) return outcome;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('gRPC over TLS from settings', () => {
  it('round-trips over TLS, verified against the CA; the server sees no client certificate', async () => {
    const address = await serve(grpcServerCredentials(tls({ certFile: server.certFile, keyFile: server.keyFile })));
    // grpc-js fills the auth context only for a verified client certificate: empty here.
    expect(await call(address, grpcChannelCredentials(tls({ caFile })))).toEqual({ ok: true, seen: { security: null, identity: null } });
    // localhost is in the SANs too.
    expect(await call(address.replace('127.0.0.1', 'localhost'), grpcChannelCredentials(tls({ caFile })))).toMatchObject({ ok: true });
  });

  it('refuses a plaintext client, and a client that trusts another CA', async () => {
    const address = await serve(grpcServerCredentials(tls({ certFile: server.certFile, keyFile: server.keyFile })));
    expect(await call(address, grpcChannelCredentials(tls({ insecure: true })))).toEqual({ ok: false, code: status.UNAVAILABLE });
    expect(await call(address, grpcChannelCredentials(tls({ caFile: otherCaFile })))).toEqual({ ok: false, code: status.UNAVAILABLE });
  });

  it('checks the name: a certificate without the dialed address is refused unless serverName names it', async () => {
    const named = writePemPair(dir, 'named-only', await issueCertificate(ca, { commonName: 'controller', dnsNames: ['controller.llmgw.internal'], usage: 'server', now }));
    const address = await serve(grpcServerCredentials(tls(named)));
    expect(await call(address, grpcChannelCredentials(tls({ caFile })))).toEqual({ ok: false, code: status.UNAVAILABLE });
    expect(await call(address, grpcChannelCredentials(tls({ caFile, serverName: 'controller.llmgw.internal' })))).toMatchObject({ ok: true });
    expect(await call(address, grpcChannelCredentials(tls({ caFile, serverName: 'elsewhere.llmgw.internal' })))).toEqual({ ok: false, code: status.UNAVAILABLE });
  });

  it('with clientAuth refuses a client without a certificate or with one from another CA, and names the one from the CA', async () => {
    const address = await serve(grpcServerCredentials(tls({ certFile: server.certFile, keyFile: server.keyFile, caFile, clientAuth: true })));
    expect(await call(address, grpcChannelCredentials(tls({ caFile })))).toEqual({ ok: false, code: status.UNAVAILABLE });
    expect(await call(address, grpcChannelCredentials(tls({ caFile, ...otherClient })))).toEqual({ ok: false, code: status.UNAVAILABLE });
    expect(await call(address, grpcChannelCredentials(tls({ caFile, ...client })))).toEqual({ ok: true, seen: { security: 'ssl', identity: 'gpu-node-1' } });
  });

  it('serves plaintext only when insecure on purpose', async () => {
    const address = await serve(grpcServerCredentials(tls({ insecure: true })));
    expect(await call(address, grpcChannelCredentials(tls({ insecure: true })))).toEqual({ ok: true, seen: { security: null, identity: null } });
    expect(await call(address, grpcChannelCredentials(tls({ caFile })))).toEqual({ ok: false, code: status.UNAVAILABLE });
  });

  it('picks up a rotated certificate from a new CA without a restart', async () => {
    const rotating = { ...writePemPair(join(dir, 'rotating'), 'server', await issueCertificate(ca, { commonName: 'controller', ipAddresses: ['127.0.0.1'], usage: 'server', now })) };
    const address = await serve(grpcServerCredentials(tls({ ...rotating, refreshMs: 100 })));
    expect(await call(address, grpcChannelCredentials(tls({ caFile })))).toMatchObject({ ok: true });

    const newCa = await generateCa({ commonName: 'llmgw rotated CA', now });
    const newCaFile = writePemPair(join(dir, 'rotating'), 'new-ca', newCa).certFile;
    writePemPair(join(dir, 'rotating'), 'server', await issueCertificate(newCa, { commonName: 'controller', ipAddresses: ['127.0.0.1'], usage: 'server', now }), { overwrite: true });

    // Same server object, same port: clients given the new CA get through once the files are re-read ...
    expect(await callUntil(address, () => grpcChannelCredentials(tls({ caFile: newCaFile })), (o) => o.ok)).toMatchObject({ ok: true });
    // ... and clients that trust only the old CA no longer do.
    expect(await call(address, grpcChannelCredentials(tls({ caFile })))).toEqual({ ok: false, code: status.UNAVAILABLE });
  });

  it('refuses to build TLS credentials without their files', () => {
    expect(() => grpcServerCredentials(tls({}))).toThrow(/certFile and keyFile/);
    expect(() => grpcServerCredentials(tls({ ...server, clientAuth: true }))).toThrow(/clientAuth needs caFile/);
    expect(() => grpcChannelCredentials(tls({}))).toThrow(/needs caFile/);
  });
});

describe('CertificateFileWatcher', () => {
  it('re-reads only while someone listens, on a timer that does not hold the process', async () => {
    const watcher = new CertificateFileWatcher({ caCertificateFile: caFile, refreshIntervalMs: 60_000 });
    expect(watcher.watching).toBe(false);
    const update = new Promise<Buffer | undefined>((resolve) => {
      const listener = (u: { caCertificate: Buffer } | null): void => {
        watcher.removeCaCertificateListener(listener);
        resolve(u?.caCertificate);
      };
      watcher.addCaCertificateListener(listener);
      expect(watcher.watching).toBe(true);
      const timer = (watcher as unknown as { refreshTimer: NodeJS.Timeout }).refreshTimer;
      expect(timer.hasRef()).toBe(false);
    });
    expect((await update)?.toString()).toBe(ca.certPem);
    expect(watcher.watching).toBe(false);
  });
});
