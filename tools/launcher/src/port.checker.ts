import { createServer } from 'node:net';

/** A port the launcher needs, and the variable that sets it. */
export interface PortClaim {
  readonly port: number;
  readonly variable: string;
  readonly app: string;
}

/**
 * Resolves when `port` can be bound on `host` right now (binds and closes at once); rejects with
 * the system's error code (EADDRINUSE, EACCES, EADDRNOTAVAIL) otherwise.
 */
export function probePort(host: string, port: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolvePromise()));
  });
}

/** A port the OS considers free on `host` (bind port 0, read it, close). */
export function pickFreePort(host: string): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = address !== null && typeof address === 'object' ? address.port : 0;
      server.close(() => (port > 0 ? resolvePromise(port) : reject(new Error('no port assigned'))));
    });
  });
}

/**
 * Checks every claimed port before anything starts, so a taken port is one clear message naming
 * the port, the app and the variable that moves it — not a stack trace from whichever app lost
 * the race. Returns every problem (empty when all are free); duplicate ports are problems too.
 */
export async function checkPorts(host: string, claims: readonly PortClaim[]): Promise<string[]> {
  const problems: string[] = [];
  const seen = new Map<number, PortClaim>();
  for (const claim of claims) {
    const earlier = seen.get(claim.port);
    if (earlier !== undefined) {
      problems.push(`port ${claim.port} is set for both ${earlier.app} (${earlier.variable}) and ${claim.app} (${claim.variable}); give each its own`);
      continue;
    }
    seen.set(claim.port, claim);
    try {
      await probePort(host, claim.port);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why =
        code === 'EADDRINUSE'
          ? 'is already in use'
          : code === 'EACCES'
            ? 'needs privileges this user lacks'
            : `cannot be bound (${code ?? (error as Error).message})`;
      problems.push(`port ${claim.port} on ${host} for the ${claim.app} ${why}: stop whatever holds it, or set ${claim.variable} to a free port`);
    }
  }
  return problems;
}
