import { createServer } from 'node:net';

/**
 * A TCP port free on `host` a moment ago (the OS picks it: listen on 0, close). Another process
 * may take it before the engine binds; the engine then fails to start and is restarted like any
 * crash.
 */
export function pickFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      const port = address !== null && typeof address === 'object' ? address.port : 0;
      server.close((error) => (error ? reject(error) : port > 0 ? resolve(port) : reject(new Error(`no port from ${String(address)}`))));
    });
  });
}
