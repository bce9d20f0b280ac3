import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RawClient } from '../test/router.harness';
import { FastHttpFrontend, type FastFrontendOptions, type FastRequest, type FastResponse } from './fast-http.frontend';

/** A real HTTP server whose Node listener answers "node <method> <url> <body>"; the fast handler is the test's. */
interface Rig {
  readonly port: number;
  readonly frontend: FastHttpFrontend;
  readonly seen: { method: string; url: string; body: string; headers: Record<string, string | undefined> }[];
  readonly handovers: string[];
  close(): Promise<void>;
}

const rigs: Rig[] = [];
afterEach(async () => {
  for (const r of rigs.splice(0)) await r.close();
});

/** Answers `fast <url> <body>` with Content-Length; a test may replace it. */
const echo = (req: FastRequest, res: FastResponse): void => {
  const text = `fast ${req.url} ${req.body.toString('utf8')}`;
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

async function rig(handler: (req: FastRequest, res: FastResponse) => void = echo, options: Partial<FastFrontendOptions> = {}): Promise<Rig> {
  const seen: Rig['seen'] = [];
  const handovers: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = `node ${req.method} ${req.url} ${Buffer.concat(chunks).toString('utf8')}`;
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  const frontend = new FastHttpFrontend(
    server,
    (req, res) => {
      seen.push({ method: req.method, url: req.url, body: req.body.toString('utf8'), headers: { ...req.headers } });
      handler(req, res);
    },
    { maxBodyBytes: 1024, keepAliveTimeoutMs: 60_000, headersTimeoutMs: 60_000, requestTimeoutMs: 60_000, minBodyBytesPerSecond: 0, bodyRateGraceMs: 10_000, now: () => Date.now(), onHandover: (r) => handovers.push(r), ...options },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const r: Rig = {
    port: (server.address() as AddressInfo).port,
    frontend,
    seen,
    handovers,
    close: async () => {
      frontend.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  rigs.push(r);
  return r;
}

const post = (url: string, body: string, extra = ''): string => `POST ${url} HTTP/1.1\r\nHost: x\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const count = (text: string, what: string): number => text.split(what).length - 1;

describe('FastHttpFrontend', () => {
  it('serves keep-alive API requests itself, one after another on one connection, with Date and Content-Length', async () => {
    const r = await rig();
    const c = new RawClient(r.port);
    c.send(post('/v1/chat/completions', '{"a":1}'));
    await c.until((t) => t.endsWith('{"a":1}'));
    c.send(post('/v1/embeddings', 'second'));
    const text = await c.until((t) => t.endsWith('second'));
    expect(count(text, 'HTTP/1.1 200 OK\r\n')).toBe(2);
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\ncontent-type: text\/plain\r\ncontent-length: 33\r\ndate: \w{3}, \d\d \w{3} \d{4} [\d:]{8} GMT\r\n\r\nfast \/v1\/chat\/completions \{"a":1\}/);
    expect(text).not.toContain('connection: close');
    expect(r.seen.map((s) => [s.method, s.url, s.body])).toEqual([
      ['POST', '/v1/chat/completions', '{"a":1}'],
      ['POST', '/v1/embeddings', 'second'],
    ]);
    expect(r.handovers).toEqual([]);
    expect(c.ended).toBe(false);
  });

  it('assembles a request that arrives in pieces, and answers pipelined requests in order', async () => {
    const r = await rig();
    const c = new RawClient(r.port);
    const first = post('/v1/completions', 'one-body');
    c.send(first.slice(0, 10));
    await new Promise((res) => setTimeout(res, 20));
    c.send(first.slice(10, first.length - 3));
    await new Promise((res) => setTimeout(res, 20));
    c.send(first.slice(first.length - 3) + post('/v1/completions', 'two') + post('/v1/completions', 'three'));
    const text = await c.until((t) => t.endsWith('three'));
    expect(text.indexOf('one-body')).toBeLessThan(text.indexOf('fast /v1/completions two'));
    expect(text.indexOf('fast /v1/completions two')).toBeLessThan(text.indexOf('three'));
    expect(r.seen.map((s) => s.body)).toEqual(['one-body', 'two', 'three']);
  });

  it('collects a large body sent in many pieces, then goes on with the request pipelined behind it', async () => {
    const r = await rig(echo, { maxBodyBytes: 4 * 1024 * 1024 });
    const c = new RawClient(r.port);
    const big = 'z'.repeat(3 * 1024 * 1024);
    const bytes = post('/v1/embeddings', big) + post('/v1/embeddings', 'next');
    for (let at = 0; at < bytes.length; at += 50_000) c.send(bytes.slice(at, at + 50_000));
    await c.until((t) => t.endsWith('fast /v1/embeddings next'), 20_000);
    expect(r.seen.map((s) => s.body.length)).toEqual([big.length, 4]);
    expect(r.seen[0].body === big).toBe(true);
  });

  it('chunks a response without Content-Length, passes the pieces through, and waits for an answer given later', async () => {
    const r = await rig((_req, res) => {
      res.writeHead(200, ['Content-Type', 'text/event-stream']);
      res.write(Buffer.from('data: 1\n\n'));
      setTimeout(() => {
        res.write(Buffer.from('data: 2\n\n'));
        res.end();
      }, 20);
    });
    const c = new RawClient(r.port);
    c.send(post('/v1/chat/completions', '{}'));
    const text = await c.until((t) => t.endsWith('0\r\n\r\n'));
    expect(text).toContain('Content-Type: text/event-stream\r\n');
    expect(text).toContain('transfer-encoding: chunked\r\n');
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe('9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n');
  });

  it('copies a large body beside the head instead of into one buffer, byte for byte', async () => {
    const big = Buffer.alloc(100_000, 'x');
    const r = await rig((_req, res) => {
      res.writeHead(200, { 'content-length': big.length });
      res.end(big);
    });
    const c = new RawClient(r.port);
    c.send(post('/v1/embeddings', '{}'));
    const text = await c.until((t) => t.length >= t.indexOf('\r\n\r\n') + 4 + big.length && t.includes('\r\n\r\n'));
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe(big.toString('latin1'));
  });

  it("hands a connection whose first request it does not serve to Node's server, with the bytes already read", async () => {
    const r = await rig();
    const metrics = new RawClient(r.port);
    metrics.send('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await metrics.until((t) => t.includes('node GET /metrics'))).toMatch(/^HTTP\/1\.1 200 OK/);

    const chunked = new RawClient(r.port);
    chunked.send('POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n');
    await chunked.until((t) => t.includes('node POST /v1/embeddings hello'));

    const old = new RawClient(r.port);
    old.send('POST /v1/embeddings HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi');
    await old.until((t) => t.includes('node POST /v1/embeddings hi'));

    expect(r.handovers).toEqual(['not an /v1 target', 'transfer-encoding', 'not HTTP/1.1']);
    expect(r.seen).toEqual([]);
  });

  it('hands over in the middle of a keep-alive connection, at the first request it does not serve', async () => {
    const r = await rig();
    const c = new RawClient(r.port);
    c.send(post('/v1/completions', 'fast-one') + 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' + post('/v1/completions', 'after'));
    const text = await c.until((t) => t.includes('node POST /v1/completions after'));
    expect(text.indexOf('fast /v1/completions fast-one')).toBeLessThan(text.indexOf('node GET /healthz'));
    expect(r.seen.map((s) => s.body)).toEqual(['fast-one']);
    expect(r.handovers).toEqual(['not an /v1 target']);
  });

  it("lets Node's parser refuse a malformed request (400), never the fast path's guess", async () => {
    const r = await rig();
    const c = new RawClient(r.port);
    c.send('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab');
    expect(await c.until((t) => t.includes('\r\n\r\n'))).toMatch(/^HTTP\/1\.1 400 Bad Request/);
    await c.closed();
    expect(r.seen).toEqual([]);
  });

  // The rig's head timeout is 60 s: an answer within the 5 s patience is Node's refusal, not the timeout.
  it.each([
    ['garbage bytes', 'this is not http at all', 'method not GET or POST'],
    ['a TLS ClientHello', '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03', 'method not GET or POST'],
    ['an LF-only request', 'GET /v1/models HTTP/1.1\nHost: x\n\n', 'bare LF in the request head'],
    ['a request line with a stray CR', 'POST /v1/models HTTP/1.1\rHost: x', 'CR without LF in the request head'],
  ])('hands %s to Node at once, which answers 400 and closes without waiting for the head timeout', async (_what, bytes, reason) => {
    const r = await rig();
    const c = new RawClient(r.port);
    c.send(bytes);
    expect(await c.until((t) => t.includes('\r\n\r\n'))).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    await c.closed();
    expect(r.handovers).toEqual([reason]);
    expect(r.seen).toEqual([]);
  });

  it("never serves a request without Host: it goes to Node's server, which refuses it", async () => {
    const r = await rig();
    const c = new RawClient(r.port);
    c.send('POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}');
    expect(await c.until((t) => t.includes('\r\n\r\n'))).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    await c.closed();
    expect(r.handovers).toEqual(['no Host header']);
    expect(r.seen).toEqual([]);
  });

  it('dispatches a request whose head readBody refuses before any of its body is kept, then closes after the answer', async () => {
    const r = await rig(
      (_req, res) => {
        res.writeHead(401, { 'content-length': 0 });
        res.end();
      },
      { maxBodyBytes: 64 * 1024 * 1024, readBody: (head) => head.headers.authorization === 'Bearer good' },
    );
    const bad = new RawClient(r.port);
    // 16 MB declared, 64 KB sent: the answer comes without the rest ever being sent.
    bad.send(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer bad\r\nContent-Length: ${16 * 1024 * 1024}\r\n\r\n${'z'.repeat(64 * 1024)}`);
    const text = await bad.until((t) => t.includes('\r\n\r\n'));
    expect(text).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
    expect(text).toContain('connection: close\r\n');
    await bad.closed();
    expect(r.seen).toEqual([expect.objectContaining({ body: '' })]);

    // A key readBody accepts has its body read as usual, and a bodiless request is never cut short.
    const good = new RawClient(r.port);
    good.send(post('/v1/chat/completions', '{"a":1}', 'Authorization: Bearer good\r\n') + 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
    await good.until((t) => count(t, 'HTTP/1.1 401') === 2);
    expect(r.seen.slice(1).map((s) => s.body)).toEqual(['{"a":1}', '']);
    expect(good.ended).toBe(false);
  });

  it('answers 408 in the OpenAI shape to a body arriving below the rate floor once the grace period is over, and closes', async () => {
    const r = await rig(echo, { maxBodyBytes: 1024 * 1024, minBodyBytesPerSecond: 1_000, bodyRateGraceMs: 100 });
    const slow = new RawClient(r.port);
    slow.send(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n${'a'.repeat(100)}`);
    const text = await slow.until((t) => t.includes('}}'));
    expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { message: 'The request body arrived slower than the minimum of 1000 bytes/s.', type: 'invalid_request_error', param: null, code: 'request_timeout' },
    });
    await slow.closed();
    expect(r.seen).toEqual([]);

    // A body sent whole is served under the same floor (it would have to stall for minutes to fall below it).
    const fast = new RawClient(r.port);
    fast.send(post('/v1/completions', 'b'.repeat(200_000)));
    await fast.until((t) => t.endsWith('b'.repeat(10)));
    expect(r.seen.map((s) => s.body.length)).toEqual([200_000]);
  });

  it('dispatches a request declaring a body over the limit unread, then closes the connection after the answer', async () => {
    const r = await rig((_req, res) => {
      res.writeHead(413, { 'content-length': 0, connection: 'close' });
      res.end();
    });
    const c = new RawClient(r.port);
    c.send(`POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n${'y'.repeat(100)}`);
    const text = await c.until((t) => t.includes('\r\n\r\n'));
    expect(text).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\n/);
    expect(text).toContain('connection: close\r\n');
    await c.closed();
    expect(r.seen).toEqual([{ method: 'POST', url: '/v1/embeddings', body: '', headers: expect.objectContaining({ 'content-length': '5000' }) }]);
  });

  it('answers Connection: close with connection: close and ends the connection', async () => {
    const r = await rig();
    const c = new RawClient(r.port);
    c.send(post('/v1/completions', 'bye', 'Connection: close\r\n'));
    const text = await c.until((t) => t.endsWith('bye'));
    expect(text).toContain('connection: close\r\n');
    await c.closed();
  });

  it("tells the response when the client goes away before it ended ('close'), and not after", async () => {
    let res: FastResponse | undefined;
    let closes = 0;
    const r = await rig((_req, response) => {
      res = response;
      response.on('close', () => closes++);
      response.writeHead(200, ['content-type', 'text/event-stream']);
      response.write(Buffer.from('data: 1\n\n'));
    });
    const c = new RawClient(r.port);
    c.send(post('/v1/chat/completions', '{}'));
    await c.until((t) => t.includes('data: 1'));
    c.socket.destroy();
    const deadline = Date.now() + 5_000;
    while (closes === 0 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 5));
    expect(closes).toBe(1);
    expect(res?.writableFinished).toBe(false);
    expect(r.frontend.size).toBe(0);
  });

  it('closes an idle keep-alive connection after the keep-alive timeout, and answers 408 to a request that never completes', async () => {
    const r = await rig(echo, { keepAliveTimeoutMs: 100, headersTimeoutMs: 100, requestTimeoutMs: 100 });
    const idle = new RawClient(r.port);
    idle.send(post('/v1/completions', 'x'));
    await idle.until((t) => t.endsWith('x'));
    await idle.closed();

    const slow = new RawClient(r.port);
    slow.send('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc');
    const answer = await slow.until((t) => t.includes('}}'));
    expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'request_timeout', type: 'invalid_request_error' } });
    await slow.closed();
    expect(r.seen.map((s) => s.body)).toEqual(['x']);
  });

  it('reads no further request while a client leaves its answers unread, and goes on once it reads', async () => {
    const answer = Buffer.alloc(128 * 1024, 'a');
    const r = await rig((_req, res) => {
      res.writeHead(200, { 'content-length': answer.length });
      res.end(answer);
    });
    const socket = connect(r.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const requests = 300;
    socket.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(requests));
    socket.pause();
    await new Promise((done) => setTimeout(done, 500));
    // Answered synchronously, yet only as many as the socket buffers hold.
    expect(r.seen.length).toBeGreaterThan(0);
    expect(r.seen.length).toBeLessThan(requests / 2);
    let received = 0;
    socket.on('data', (d: Buffer) => (received += d.length));
    socket.resume();
    const deadline = Date.now() + 20_000;
    while (r.seen.length < requests && Date.now() < deadline) await new Promise((done) => setTimeout(done, 20));
    expect(r.seen.length).toBe(requests);
    while (received < requests * answer.length && Date.now() < deadline) await new Promise((done) => setTimeout(done, 20));
    expect(received).toBeGreaterThan(requests * answer.length);
    socket.destroy();
  });

  it('closes a connection it ends even when the client never closes its side', async () => {
    const r = await rig();
    const socket = connect({ port: r.port, host: '127.0.0.1', allowHalfOpen: true });
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    socket.write(post('/v1/completions', 'x', 'Connection: close\r\n'));
    const deadline = Date.now() + 5_000;
    while (r.seen.length === 0 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 5));
    while (r.frontend.size > 0 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 5));
    expect(r.frontend.size).toBe(0);
    socket.destroy();
  });

  it('on drain closes idle connections at once and lets a busy one finish with connection: close', async () => {
    let finish: (() => void) | undefined;
    const r = await rig((req, res) => {
      if (req.body.toString() === 'slow') {
        finish = () => {
          res.writeHead(200, { 'content-length': 4 });
          res.end('done');
        };
        return;
      }
      echo(req, res);
    });
    const idle = new RawClient(r.port);
    idle.send(post('/v1/completions', 'quick'));
    await idle.until((t) => t.endsWith('quick'));
    const busy = new RawClient(r.port);
    busy.send(post('/v1/completions', 'slow'));
    const deadline = Date.now() + 5_000;
    while (finish === undefined && Date.now() < deadline) await new Promise((done) => setTimeout(done, 5));

    r.frontend.drain();
    await idle.closed();
    expect(busy.ended).toBe(false);
    finish?.();
    const text = await busy.until((t) => t.endsWith('done'));
    expect(text).toContain('connection: close\r\n');
    await busy.closed();
  });
});
