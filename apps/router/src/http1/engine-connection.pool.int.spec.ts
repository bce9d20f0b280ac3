import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { EnginePool, EngineRequestError, type EngineAddress } from './engine-connection.pool';
import type { ResponseHead } from './http1-response.parser';

/** A raw TCP "engine": for each request received, `answer` decides the bytes (or the socket's fate). */
async function rawEngine(answer: (socket: Socket, request: string, n: number) => void): Promise<{ server: Server; address: EngineAddress; connections: () => number }> {
  let connections = 0;
  let n = 0;
  const server = createServer((socket) => {
    connections++;
    let pending = '';
    socket.on('data', (d) => {
      pending += d.toString('latin1');
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        const request = pending.slice(0, end + 4 + length);
        pending = pending.slice(end + 4 + length);
        answer(socket, request, ++n);
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { server, address: { hostname: '127.0.0.1', port, key: `127.0.0.1:${port}` }, connections: () => connections };
}

interface Outcome {
  head?: ResponseHead;
  body: string;
  error?: EngineRequestError;
}

function call(pool: EnginePool, address: EngineAddress, body = '{}', timeouts = { firstByteMs: 2_000, idleMs: 2_000 }): Promise<Outcome> {
  return new Promise((resolve) => {
    const out: Outcome = { body: '' };
    const head = Buffer.from(`POST /v1/x HTTP/1.1\r\nhost: ${address.key}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`);
    pool.request(address, [head, Buffer.from(body)], {
      onHead: (h) => (out.head = h),
      onBody: (b) => (out.body += b.toString()),
      onEnd: () => resolve(out),
      onError: (e) => resolve({ ...out, error: e }),
    }, timeouts);
  });
}

const ok = (socket: Socket, text = 'ok', extra = ''): boolean => socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${text.length}\r\n${extra}\r\n${text}`);
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function pool(): EnginePool {
  const p = new EnginePool({ connectTimeoutMs: 500, idleSocketTimeoutMs: 200, maxIdlePerEngine: 4 });
  cleanups.push(() => p.destroy());
  return p;
}

describe('EnginePool', () => {
  it('sends the request bytes as given and reuses the connection for the next request', async () => {
    const seen: string[] = [];
    const engine = await rawEngine((socket, request) => {
      seen.push(request);
      ok(socket, 'hello');
    });
    cleanups.push(() => engine.server.close());
    const p = pool();
    for (let i = 0; i < 3; i++) expect(await call(p, engine.address, `{"i":${i}}`)).toMatchObject({ head: { status: 200 }, body: 'hello' });
    expect(engine.connections()).toBe(1);
    expect(p.idleCount(engine.address.key)).toBe(1);
    expect(seen[2]).toBe(`POST /v1/x HTTP/1.1\r\nhost: ${engine.address.key}\r\ncontent-length: 7\r\n\r\n{"i":2}`);
  });

  it('does not reuse a connection the engine says it will close, or one that sent bytes nobody asked for', async () => {
    const engine = await rawEngine((socket, _r, n) => {
      if (n === 1) ok(socket, 'a', 'Connection: close\r\n');
      else if (n === 2) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nbHTTP/1.1 200 OK\r\n');
      else ok(socket, 'c');
    });
    cleanups.push(() => engine.server.close());
    const p = pool();
    expect((await call(p, engine.address)).body).toBe('a');
    expect((await call(p, engine.address)).body).toBe('b');
    expect((await call(p, engine.address)).body).toBe('c');
    expect(engine.connections()).toBe(3);
  });

  it('closes idle connections after the idle timeout', async () => {
    const engine = await rawEngine((socket) => ok(socket));
    cleanups.push(() => engine.server.close());
    const p = pool();
    await call(p, engine.address);
    expect(p.idleCount(engine.address.key)).toBe(1);
    await waitFor(() => p.idleCount(engine.address.key) === 0, { deadlineMs: 2_000, message: 'idle connection closed' });
  });

  it.each([
    ['connect', 'a refused connection', { firstByteMs: 2_000, idleMs: 2_000 }],
    ['timeout', 'no answer within the first-byte timeout', { firstByteMs: 100, idleMs: 2_000 }],
    ['timeout', 'silence in the middle of the body', { firstByteMs: 2_000, idleMs: 100 }],
    ['reset', 'a connection closed before answering', { firstByteMs: 2_000, idleMs: 2_000 }],
    ['protocol', 'an answer that is not HTTP', { firstByteMs: 2_000, idleMs: 2_000 }],
  ] as const)('reports %s for %s', async (kind, name, timeouts) => {
    const engine = await rawEngine((socket) => {
      if (name === 'silence in the middle of the body') socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc');
      else if (name === 'a connection closed before answering') socket.destroy();
      else if (name === 'an answer that is not HTTP') socket.write('SSH-2.0-OpenSSH\r\n\r\n');
    });
    if (kind === 'connect') await new Promise((resolve) => engine.server.close(resolve)); // nothing listens there now
    else cleanups.push(() => engine.server.close());
    const out = await call(pool(), engine.address, '{}', timeouts);
    expect(out.error).toBeInstanceOf(EngineRequestError);
    expect(out.error).toMatchObject({ kind, reused: false, headReceived: name === 'silence in the middle of the body' });
  });

  it('marks a failure on a pooled connection as reused', async () => {
    const engine = await rawEngine((socket, _r, n) => {
      if (n === 1) ok(socket);
      else socket.destroy();
    });
    cleanups.push(() => engine.server.close());
    const p = pool();
    await call(p, engine.address);
    expect((await call(p, engine.address)).error).toMatchObject({ kind: 'reset', reused: true, headReceived: false });
  });
});
