// Properties of the router's HTTP/1.1 front end (fast-check): pipelined API requests arriving in
// any byte split reach the handler the same, in order and whole; and the head parser answers
// every input — bytes a hostile client may send — with a result, never an exception.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawClient } from '../test/router.harness';
import { FastHttpFrontend, type FastRequest, type FastResponse } from './fast-http.frontend';
import { parseRequestHead, unservableHeadPrefix } from './http1-request.parser';

interface Seen {
  method: string;
  url: string;
  body: string;
  auth: string | undefined;
}

describe('the fast front end under any byte split', () => {
  let server: Server;
  let frontend: FastHttpFrontend;
  let port: number;
  let seen: Seen[] = [];
  let handovers: string[] = [];

  beforeAll(async () => {
    server = createServer((_req, res) => res.end('node'));
    frontend = new FastHttpFrontend(
      server,
      (req: FastRequest, res: FastResponse) => {
        seen.push({ method: req.method, url: req.url, body: req.body.toString('utf8'), auth: req.headers.authorization });
        const text = `ok ${seen.length}`;
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      },
      { maxBodyBytes: 64 * 1024, keepAliveTimeoutMs: 60_000, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, minBodyBytesPerSecond: 0, bodyRateGraceMs: 10_000, now: () => Date.now(), onHandover: (r) => handovers.push(r) },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    frontend.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const request = fc.record({
    path: fc.constantFrom('/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/chat/completions?x=1'),
    body: fc.string({ unit: 'binary', maxLength: 300 }),
    auth: fc.option(fc.stringMatching(/^[A-Za-z0-9_-]{16,40}$/), { nil: undefined }),
  });

  it('hands every pipelined request to the handler whole and in order, however its bytes arrive', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 4 }), fc.array(fc.nat(), { maxLength: 8 }), async (requests, cuts) => {
        seen = [];
        handovers = [];
        const wire = Buffer.concat(
          requests.map((r) => {
            const body = Buffer.from(r.body, 'utf8');
            const auth = r.auth === undefined ? '' : `Authorization: Bearer ${r.auth}\r\n`;
            return Buffer.concat([Buffer.from(`POST ${r.path} HTTP/1.1\r\nHost: router\r\n${auth}Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
          }),
        );
        const points = [...new Set(cuts.map((c) => c % wire.length))].filter((p) => p > 0).sort((a, b) => a - b);
        const client = new RawClient(port);
        let at = 0;
        for (const p of [...points, wire.length]) {
          client.send(wire.subarray(at, p));
          at = p;
          await sleep(1);
        }
        await client.until((t) => t.includes(`ok ${requests.length}`), 5_000);
        client.socket.destroy();
        expect(handovers).toEqual([]);
        expect(seen).toEqual(requests.map((r) => ({ method: 'POST', url: r.path, body: Buffer.from(r.body, 'utf8').toString('utf8'), auth: r.auth === undefined ? undefined : `Bearer ${r.auth}` })));
      }),
      { numRuns: 40 },
    );
  }, 60_000);
});

describe('the head parser on hostile bytes', () => {
  it('answers any head text with a result and never throws', () => {
    const line = fc.oneof(fc.string({ unit: 'binary', maxLength: 60 }), fc.constantFrom('POST /v1/chat/completions HTTP/1.1', 'GET /v1/models HTTP/1.1', 'Content-Length: 5', 'Content-Length: -1', 'Transfer-Encoding: chunked', 'Host: x', ':', ' folded', '__proto__: x'));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 8 }), fc.constantFrom('\r\n', '\n', '\r'), (lines, eol) => {
        const r = parseRequestHead(lines.join(eol));
        expect(typeof r.ok).toBe('boolean');
        if (r.ok) expect(Number.isSafeInteger(r.head.contentLength) && r.head.contentLength >= 0).toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it('sorts any byte prefix as servable or not, without throwing', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const why = unservableHeadPrefix(bytes, 0, bytes.length);
        expect(why === undefined || typeof why === 'string').toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });
});
