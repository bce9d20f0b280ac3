import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '@llmgw/testing';
import { watchLiveness, waitUntilReady } from './readiness.probe';

describe('waitUntilReady (real HTTP)', () => {
  const servers: Server[] = [];
  afterEach(() => servers.splice(0).forEach((s) => s.close()));

  function listen(handler: (n: number) => number, port = 0): Promise<number> {
    let n = 0;
    const server = createServer((_req, res) => res.writeHead(handler(++n)).end());
    servers.push(server);
    return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
  }

  it('llama.cpp style: 503 while loading, then 200', async () => {
    const port = await listen((n) => (n < 3 ? 503 : 200));
    const outcome = await waitUntilReady({ url: `http://127.0.0.1:${port}/health`, readiness: 'http-503-until-ready', deadlineMs: 10_000, intervalMs: 10, signal: new AbortController().signal });
    expect(outcome).toEqual({ ready: true });
  });

  it('vLLM style: refused connections are "still loading"; ready once it listens and answers 200', async () => {
    const reserve = createServer();
    const port = await new Promise<number>((resolve) => reserve.listen(0, '127.0.0.1', () => resolve((reserve.address() as AddressInfo).port)));
    await new Promise<void>((resolve) => reserve.close(() => resolve()));
    const url = `http://127.0.0.1:${port}/health`;
    const refused = await waitUntilReady({ url, readiness: 'refuses-until-ready', deadlineMs: 150, intervalMs: 20, signal: new AbortController().signal });
    expect(refused).toMatchObject({ ready: false, aborted: false, reason: expect.stringContaining('refusing connections (still loading)') });
    await listen(() => 200, port);
    expect(await waitUntilReady({ url, readiness: 'refuses-until-ready', deadlineMs: 10_000, intervalMs: 20, signal: new AbortController().signal })).toEqual({ ready: true });
  });

  it('names what it saw last when the deadline passes, and stops at once when aborted', async () => {
    const port = await listen(() => 503);
    const late = await waitUntilReady({ url: `http://127.0.0.1:${port}/health`, readiness: 'http-503-until-ready', deadlineMs: 100, intervalMs: 10, signal: new AbortController().signal });
    expect(late).toEqual({ ready: false, aborted: false, reason: expect.stringMatching(/^not ready within 100 ms: still loading \(HTTP 503\)/) });
    const abort = new AbortController();
    abort.abort('engine exited');
    const aborted = await waitUntilReady({ url: `http://127.0.0.1:${port}/health`, readiness: 'http-503-until-ready', deadlineMs: 10_000, intervalMs: 10, signal: abort.signal });
    expect(aborted).toEqual({ ready: false, aborted: true, reason: 'engine exited' });
  });
});

describe('watchLiveness (real HTTP)', () => {
  const servers: Server[] = [];
  afterEach(() => servers.splice(0).forEach((s) => (s.closeAllConnections(), s.close())));

  /** A health endpoint answering 200, or never answering while `frozen` says so. */
  function listen(frozen: (n: number) => boolean): Promise<string> {
    let n = 0;
    const server = createServer((_req, res) => {
      if (!frozen(++n)) res.writeHead(200).end();
    });
    servers.push(server);
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/health`)));
  }

  it('ends after the given number of checks in a row go unanswered, naming the last', async () => {
    const url = await listen(() => true);
    const outcome = await watchLiveness({ url, intervalMs: 10, timeoutMs: 50, failures: 3, signal: new AbortController().signal });
    expect(outcome).toEqual({ aborted: false, reason: `engine unresponsive: 3 health check(s) in a row failed, the last with no answer within 50 ms at ${url}` });
  });

  it('forgives a failure that a 200 follows', async () => {
    // Fails every other check: never two in a row, so only the abort ends the watch.
    let checks = 0;
    const url = await listen((n) => ((checks = n), n % 2 === 0));
    const abort = new AbortController();
    const watching = watchLiveness({ url, intervalMs: 5, timeoutMs: 50, failures: 2, signal: abort.signal });
    await waitFor(() => checks >= 8, { deadlineMs: 10_000, message: 'eight checks' });
    abort.abort('stopping');
    expect(await watching).toEqual({ aborted: true });
  });

  it('counts a refused connection as a failure', async () => {
    const url = await listen(() => false);
    await new Promise<void>((resolve) => servers[0].close(() => resolve()));
    const outcome = await watchLiveness({ url, intervalMs: 5, timeoutMs: 1_000, failures: 1, signal: new AbortController().signal });
    expect(outcome).toEqual({ aborted: false, reason: expect.stringMatching(/the last with unreachable \(ECONNREFUSED\)/) });
  });
});
