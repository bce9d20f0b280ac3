import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from './tcp.proxy';
import { waitFor } from './wait-for';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** An echo server on a free port. */
async function echoServer(): Promise<Server> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return server;
}

/** A client socket through the proxy, collecting what comes back and how it ended. */
async function client(proxy: TcpProxy): Promise<{ socket: Socket; received: () => string; ended: () => string | undefined }> {
  const socket = connect(proxy.port, '127.0.0.1');
  let data = '';
  let ended: string | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (data += chunk));
  socket.on('error', (error: NodeJS.ErrnoException) => (ended ??= error.code ?? error.message));
  socket.on('close', () => (ended ??= 'closed'));
  await new Promise<void>((resolve) => {
    socket.once('connect', () => resolve());
    socket.once('close', () => resolve());
  });
  cleanups.push(() => void socket.destroy());
  return { socket, received: () => data, ended: () => ended };
}

async function proxyTo(server: Server, timer?: (ms: number, fn: () => void) => void): Promise<TcpProxy> {
  const proxy = await startTcpProxy({ port: (server.address() as AddressInfo).port }, timer ? { timer } : {});
  cleanups.push(() => proxy.close());
  return proxy;
}

describe('TcpProxy', () => {
  it('passes bytes both ways', async () => {
    const proxy = await proxyTo(await echoServer());
    const c = await client(proxy);
    c.socket.write('hello');
    await waitFor(() => c.received() === 'hello', { deadlineMs: 5_000, message: 'echo' });
    expect(proxy.counts).toMatchObject({ accepted: 1, refused: 0, open: 1 });
  });

  it('delay: holds every chunk toward the server until its timer fires, keeps their order, and lets answers through', async () => {
    const timers: { ms: number; fn: () => void }[] = [];
    const proxy = await proxyTo(await echoServer(), (ms, fn) => timers.push({ ms, fn }));
    const c = await client(proxy);
    proxy.setMode({ kind: 'delay', delayMs: 2_000 });
    c.socket.write('a');
    await waitFor(() => timers.length === 1, { deadlineMs: 5_000, message: 'the first chunk held' });
    c.socket.write('b');
    await waitFor(() => timers.length === 2, { deadlineMs: 5_000, message: 'the second chunk held' });
    expect(timers.map((t) => t.ms)).toEqual([2_000, 2_000]);
    // The second is released first; neither reaches the server before the first is.
    timers[1].fn();
    await new Promise((r) => setTimeout(r, 50));
    expect(timers).toHaveLength(2);
    timers[0].fn();
    // Both reached the echo server, in order; its answer comes straight back.
    await waitFor(() => c.received() === 'ab', { deadlineMs: 5_000, message: 'the echo' });
    expect(timers).toHaveLength(2);
  });

  it('refuse: resets new connections while open ones keep passing', async () => {
    const proxy = await proxyTo(await echoServer());
    const open = await client(proxy);
    proxy.setMode({ kind: 'refuse' });
    const refused = await client(proxy);
    await waitFor(() => refused.ended() !== undefined, { deadlineMs: 5_000, message: 'the new connection reset' });
    expect(refused.received()).toBe('');
    open.socket.write('still here');
    await waitFor(() => open.received() === 'still here', { deadlineMs: 5_000, message: 'the open connection passes' });
    expect(proxy.counts).toMatchObject({ accepted: 1, refused: 1, open: 1 });
    proxy.setMode({ kind: 'pass' });
    const again = await client(proxy);
    again.socket.write('back');
    await waitFor(() => again.received() === 'back', { deadlineMs: 5_000, message: 'accepted again' });
  });

  it('cut: resets every open connection and every new one, until passing again', async () => {
    const proxy = await proxyTo(await echoServer());
    const open = await client(proxy);
    proxy.setMode({ kind: 'cut' });
    await waitFor(() => open.ended() !== undefined, { deadlineMs: 5_000, message: 'the open connection reset' });
    const refused = await client(proxy);
    await waitFor(() => refused.ended() !== undefined, { deadlineMs: 5_000, message: 'the new connection reset' });
    expect(proxy.counts).toMatchObject({ accepted: 1, refused: 1, open: 0 });
    proxy.setMode({ kind: 'pass' });
    const again = await client(proxy);
    again.socket.write('back');
    await waitFor(() => again.received() === 'back', { deadlineMs: 5_000, message: 'accepted again' });
  });
});
