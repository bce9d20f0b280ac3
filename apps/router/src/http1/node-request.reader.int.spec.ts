import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApiRequest, BodyLimits } from './api-exchange';
import { serveNodeRequest } from './node-request.reader';

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  server = undefined;
});

/** A Node server whose requests go through serveNodeRequest; resolves with what the handler saw and the client's status. */
async function roundTrip(limits: BodyLimits, headers: Record<string, string>, pieces: string[]): Promise<{ seen: ApiRequest; status: number }> {
  let seen: ApiRequest | undefined;
  server = createServer((req, res) =>
    serveNodeRequest(req, res, limits, (r, out) => {
      seen = r;
      out.writeHead(r.bodyTooLarge ? 413 : 200, { connection: 'close' });
      out.end();
    }),
  );
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const status = await new Promise<number>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions?x=1', headers }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    for (const p of pieces) req.write(p);
    req.end();
  });
  if (seen === undefined) throw new Error('the handler never ran');
  return { seen, status };
}

describe('serveNodeRequest: requests Node parsed, in the fast front end\'s shape', () => {
  it('hands over the whole body of a chunked upload, with method, target and headers', async () => {
    const { seen, status } = await roundTrip({ maxBodyBytes: 1024 }, { 'x-a': 'b' }, ['{"model":', '"m"}']);
    expect(status).toBe(200);
    expect([seen.method, seen.url, seen.headers['x-a'], seen.body.toString(), seen.bodyTooLarge]).toEqual(['POST', '/v1/chat/completions?x=1', 'b', '{"model":"m"}', false]);
    expect(seen.rawHeaders).toContain('x-a');
  });

  it('dispatches a body over the limit unread, declared or as it arrives', async () => {
    const declared = await roundTrip({ maxBodyBytes: 4 }, { 'content-length': '10' }, ['0123456789']);
    expect([declared.status, declared.seen.bodyTooLarge, declared.seen.body.length]).toEqual([413, true, 0]);
    const chunked = await roundTrip({ maxBodyBytes: 4 }, {}, ['012', '345', '678']);
    expect([chunked.status, chunked.seen.bodyTooLarge, chunked.seen.body.length]).toEqual([413, true, 0]);
  });

  it('dispatches at once, body unread, a request whose head readBody refuses', async () => {
    const { seen } = await roundTrip({ maxBodyBytes: 1024, readBody: (head) => head.headers.authorization === 'Bearer good' }, { authorization: 'Bearer bad' }, ['{}']);
    expect([seen.body.length, seen.bodyTooLarge]).toEqual([0, false]);
  });
});
