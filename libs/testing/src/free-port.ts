import { createServer } from 'node:net';

/**
 * A TCP port that was free on `host` a moment ago: the OS picks it (listen on 0), we close
 * and return it. Another process may take it before the caller binds, so prefer letting the
 * program under test listen on port 0 and report its port; use this only where that is impossible.
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`freePort: unexpected server address ${String(address)}`));
        return;
      }
      server.close((err) => (err ? reject(err) : resolve(address.port)));
    });
  });
}
