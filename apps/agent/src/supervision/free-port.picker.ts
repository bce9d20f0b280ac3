import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** An inclusive range of TCP ports, `first` ≤ `last`. */
export interface PortRange {
  readonly first: number;
  readonly last: number;
}

/**
 * Engine and Ray rendezvous ports come from here unless LLMGW_AGENT_ENGINE_PORTS says otherwise:
 * below Linux's default ephemeral range (32768–60999), which the kernel hands out for `listen(0)`
 * and for every outgoing connection. A port picked from that range and closed again could be
 * taken by any process's next connection before the engine binds it, and a replica restarted in
 * place keeps its port, so every restart would fail on it until the agent gave up.
 */
export const DEFAULT_ENGINE_PORTS: PortRange = { first: 20_000, last: 29_999 };

/** Random tries per pick before giving up on a crowded range. */
const TRIES = 64;

/** `"A-B"` (or one port `"A"`) as a range of ports 1024–65535, or why not. */
export function parsePortRange(raw: string): { ok: true; value: PortRange } | { ok: false; reason: string } {
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(raw.trim());
  if (!m) return { ok: false, reason: 'expected a port range FIRST-LAST, such as 20000-29999' };
  const first = Number(m[1]);
  const last = m[2] === undefined ? first : Number(m[2]);
  if (first < 1024 || last > 65_535) return { ok: false, reason: 'ports must lie in 1024-65535' };
  if (first > last) return { ok: false, reason: `the first port ${first} is above the last ${last}` };
  return { ok: true, value: { first, last } };
}

/**
 * A port of `range` free on `host` at this moment: random ports of the range are tried (listen,
 * exclusive, then close) until one binds. `random` answers in [0, 1). Throws naming the range
 * when `TRIES` picks in a row are taken, and at once for any error other than a port in use
 * (an address this host does not have, say).
 */
export async function pickPortInRange(host: string, range: PortRange, random: () => number): Promise<number> {
  const size = range.last - range.first + 1;
  for (let i = 0; i < TRIES; i++) {
    const port = range.first + Math.min(size - 1, Math.floor(random() * size));
    if (await canListen(host, port)) return port;
  }
  throw new Error(`no free port in ${range.first}-${range.last} on ${host} after ${TRIES} tries; widen LLMGW_AGENT_ENGINE_PORTS`);
}

function canListen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(false) : reject(error)));
    server.listen({ port, host, exclusive: true }, () => server.close((error) => (error ? reject(error) : resolve(true))));
  });
}

/**
 * The kernel's ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`), or undefined
 * where it cannot be read (not Linux).
 */
export function ephemeralPortRange(read: () => string = () => readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')): PortRange | undefined {
  try {
    const [first, last] = read().trim().split(/\s+/).map(Number);
    return Number.isInteger(first) && Number.isInteger(last) && first <= last ? { first, last } : undefined;
  } catch {
    return undefined;
  }
}

/** True when the two ranges share a port. */
export function rangesOverlap(a: PortRange, b: PortRange): boolean {
  return a.first <= b.last && b.first <= a.last;
}
