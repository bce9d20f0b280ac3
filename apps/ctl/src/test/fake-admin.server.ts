// A small HTTP server on port 0 that answers like the controller's admin API (or the catalog
// API) with canned JSON, and records what it was asked: for `llmgw` command tests.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the fake saw. */
export interface SeenRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** An answer: a status (default 200) and a JSON body, or a function computing one per request. */
export type FakeAnswer = { status?: number; body?: unknown; contentType?: string };
export type FakeRoute = FakeAnswer | ((req: SeenRequest) => FakeAnswer);

export interface FakeServer {
  readonly url: string;
  readonly requests: SeenRequest[];
  /** Replaces or adds a route, keyed `METHOD /path` (the query is not part of the key). */
  route(key: string, answer: FakeRoute): void;
  close(): Promise<void>;
}

/**
 * Starts the fake. Unknown routes answer 404 problem+json. With `token`, a request without
 * `Authorization: Bearer <token>` answers 401 problem+json, as the real servers do.
 */
export async function startFakeServer(routes: Record<string, FakeRoute> = {}, token?: string): Promise<FakeServer> {
  const table = new Map(Object.entries(routes));
  const requests: SeenRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen: SeenRequest = { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(seen);
      const send = (status: number, body: unknown, type = 'application/json'): void => {
        res.writeHead(status, { 'content-type': type });
        res.end(body === undefined ? '' : JSON.stringify(body));
      };
      if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) {
        send(401, { type: 'https://llmgw.dev/problems/unauthorized', title: 'Unauthorized', status: 401, detail: 'missing or wrong admin token' }, 'application/problem+json');
        return;
      }
      const route = table.get(`${seen.method} ${seen.url.split('?')[0]}`);
      if (!route) {
        send(404, { type: 'https://llmgw.dev/problems/not-found', title: 'Not Found', status: 404, detail: `no route ${seen.method} ${seen.url}` }, 'application/problem+json');
        return;
      }
      const answer = typeof route === 'function' ? route(seen) : route;
      const status = answer.status ?? 200;
      send(status, answer.body, answer.contentType ?? (status >= 400 ? 'application/problem+json' : 'application/json'));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    route: (key, answer) => table.set(key, answer),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
