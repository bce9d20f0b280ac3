import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseIpNetwork, type IpNetwork } from '@llmgw/catalog';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AddressRefusedError, PolicyHttpClient, type Resolver } from './http.client';
import { SourcePolicy } from './source.policy';

const policy = (allowNets: string[]) => new SourcePolicy({ schemes: ['http', 'https'], allowNets: allowNets.map((n) => parseIpNetwork(n) as IpNetwork), dirs: [] });
const signal = () => AbortSignal.timeout(10_000);

describe('PolicyHttpClient (real loopback server)', () => {
  let server: Server;
  let port: number;
  let seen: { url: string; headers: IncomingHttpHeaders }[];
  let redirectTo: string | undefined;
  beforeEach(async () => {
    seen = [];
    redirectTo = undefined;
    server = createServer((req, res) => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      if (redirectTo !== undefined && req.url === '/start') {
        res.writeHead(302, { location: redirectTo });
        res.end();
        return;
      }
      res.writeHead(200, { 'content-length': 2 });
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const text = async (res: Awaited<ReturnType<PolicyHttpClient['get']>>): Promise<string> => {
    let out = '';
    for await (const chunk of res.body) out += Buffer.from(chunk).toString();
    return out;
  };

  it('refuses a loopback IP literal before connecting; with its network allowed, connects', async () => {
    const refused = await new PolicyHttpClient(policy([])).get(`http://127.0.0.1:${port}/x`, { headers: {}, signal: signal() }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AddressRefusedError);
    expect((refused as Error).message).toMatch(/refused to connect to http:\/\/127\.0\.0\.1:\d+: 127\.0\.0\.1 is in a refused range \(loopback/);
    expect(seen).toEqual([]);
    const res = await new PolicyHttpClient(policy(['127.0.0.1/32'])).get(`http://127.0.0.1:${port}/x`, { headers: {}, signal: signal() });
    expect(res.status).toBe(200);
    expect(await text(res)).toBe('ok');
  });

  it('checks the address a host name resolves to when connecting, so a name that rebinds to loopback is refused', async () => {
    // The resolution checked is the one the socket connects with (the lookup hook): there is no
    // earlier answer a rebinding name could have given differently.
    const calls: string[] = [];
    const rebinding: Resolver = async (host) => {
      calls.push(host);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const refused = await new PolicyHttpClient(policy([]), rebinding).get(`http://models.example:${port}/x`, { headers: {}, signal: signal() }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AddressRefusedError);
    expect((refused as Error).message).toMatch(/refused to connect to models\.example: it resolves to 127\.0\.0\.1, which is in a refused range \(loopback/);
    expect(calls).toEqual(['models.example']);
    expect(seen).toEqual([]);

    // A name with several addresses is refused when any of them is.
    const mixed: Resolver = async () => [
      { address: '93.184.215.14', family: 4 },
      { address: '169.254.169.254', family: 4 },
    ];
    await expect(new PolicyHttpClient(policy([]), mixed).get(`http://models.example:${port}/x`, { headers: {}, signal: signal() })).rejects.toThrow(/169\.254\.169\.254, which is in a refused range/);

    // And the connection really goes to the checked address: allowed, the request arrives.
    const toLoopback: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    const res = await new PolicyHttpClient(policy(['127.0.0.1/32']), toLoopback).get(`http://models.example:${port}/y`, { headers: {}, signal: signal() });
    expect(res.status).toBe(200);
    await text(res);
    expect(seen.map((s) => [s.url, s.headers.host])).toEqual([['/y', `models.example:${port}`]]);
  });

  it.each([
    ['the metadata address', 'http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254 is in a refused range \(link-local/],
    ['another loopback address', 'http://127.0.0.2:1/x', /127\.0\.0\.2 is in a refused range \(loopback/],
    ['an IPv6 loopback', 'http://[::1]:1/x', /::1 is in a refused range \(loopback/],
    ['a file:// URL', 'file:///etc/shadow', /only http and https are fetched/],
  ])('does not follow a redirect to %s', async (_what, target, reason) => {
    redirectTo = target;
    const refused = await new PolicyHttpClient(policy(['127.0.0.1/32'])).get(`http://127.0.0.1:${port}/start`, { headers: {}, signal: signal() }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AddressRefusedError);
    expect((refused as Error).message).toMatch(reason);
    expect(seen.map((s) => s.url)).toEqual(['/start']);
  });

  it('a body that stops arriving ends with the abort once the signal fires, after every byte that came', async () => {
    const stalled = createServer((_req, res) => {
      res.writeHead(200, { 'content-length': 10 });
      res.write('abc'); // and then nothing
    });
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
    try {
      const abort = new AbortController();
      const res = await new PolicyHttpClient(policy(['127.0.0.1/32'])).get(`http://127.0.0.1:${(stalled.address() as AddressInfo).port}/x`, { headers: {}, signal: abort.signal });
      const got: string[] = [];
      const reading = (async () => {
        for await (const chunk of res.body) {
          got.push(Buffer.from(chunk).toString());
          abort.abort(new Error('stalled'));
        }
      })();
      await expect(reading).rejects.toThrow();
      expect(got.join('')).toBe('abc');
    } finally {
      stalled.closeAllConnections();
      await new Promise<void>((resolve) => stalled.close(() => resolve()));
    }
  });

  it('a connection cut before the body is read still ends the read with an error, after the bytes that came', async () => {
    // The server sends part of the body and closes; the reader starts only once the connection
    // is gone on both ends (as when the downloader opens its file first). Without listening from
    // the response on, the close went unseen and the read waited forever.
    let closed!: Promise<void>;
    const cutting = createServer((_req, res) => {
      closed = new Promise((resolve) => res.socket?.once('close', () => resolve()));
      res.writeHead(200, { 'content-length': 1000 });
      res.write('0123456789', () => res.socket?.end());
    });
    await new Promise<void>((resolve) => cutting.listen(0, '127.0.0.1', resolve));
    try {
      const res = await new PolicyHttpClient(policy(['127.0.0.1/32'])).get(`http://127.0.0.1:${(cutting.address() as AddressInfo).port}/x`, { headers: {}, signal: signal() });
      await closed;
      await new Promise((resolve) => setImmediate(resolve));
      const got: string[] = [];
      const reading = (async () => {
        for await (const chunk of res.body) got.push(Buffer.from(chunk).toString());
        return 'ended';
      })().catch((e: unknown) => e);
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([reading, new Promise((resolve) => (timer = setTimeout(() => resolve('still waiting'), 10_000)))]);
      clearTimeout(timer);
      expect(outcome).toBeInstanceOf(Error);
      expect(got.join('')).toBe('0123456789');
    } finally {
      cutting.closeAllConnections();
      await new Promise<void>((resolve) => cutting.close(() => resolve()));
    }
  });

  it('follows an allowed redirect, dropping Authorization when it leaves the origin', async () => {
    const other = createServer((req, res) => {
      seen.push({ url: `other${req.url ?? ''}`, headers: req.headers });
      res.end('moved');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      redirectTo = `http://127.0.0.1:${(other.address() as AddressInfo).port}/file`;
      const res = await new PolicyHttpClient(policy(['127.0.0.1/32'])).get(`http://127.0.0.1:${port}/start`, { headers: { Authorization: 'Bearer t' }, signal: signal() });
      expect(await text(res)).toBe('moved');
      expect(seen.map((s) => [s.url, s.headers.authorization])).toEqual([
        ['/start', 'Bearer t'],
        ['other/file', undefined],
      ]);
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });
});
