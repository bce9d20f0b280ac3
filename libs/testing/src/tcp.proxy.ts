import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * What a {@link TcpProxy} does with traffic:
 * - `pass`: forwards both ways as it comes;
 * - `delay`: holds every chunk on its way to the target `delayMs` before forwarding it (order
 *   kept; answers pass at once), so every request–answer round trip costs delayMs more;
 * - `refuse`: resets every new connection at once; connections already open keep passing (a
 *   server at its connection limit, or one whose listener is gone but whose sessions live);
 * - `cut`: resets every open connection and every new one (a crashed or firewalled server).
 */
export type ProxyMode = { readonly kind: 'pass' } | { readonly kind: 'delay'; readonly delayMs: number } | { readonly kind: 'refuse' } | { readonly kind: 'cut' };

/** Runs `fn` once after about `ms` ms. Injected so tests hold the delayed chunks by hand. */
export type ProxyTimer = (ms: number, fn: () => void) => void;

const realTimer: ProxyTimer = (ms, fn) => void setTimeout(fn, ms);

/**
 * A TCP proxy on 127.0.0.1 in front of `target` that a test switches between modes while
 * clients stay connected: a store that answers slowly, refuses, or drops everything, without
 * touching the server behind it (which others may share). Counts what it saw.
 */
export class TcpProxy {
  private modeValue: ProxyMode = { kind: 'pass' };
  private readonly open = new Set<{ client: Socket; upstream: Socket }>();
  private acceptedCount = 0;
  private refusedCount = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    readonly target: { readonly host: string; readonly port: number },
    private readonly timer: ProxyTimer,
  ) {}

  /** Listens on a free port of 127.0.0.1; starts in `pass`. */
  static async start(target: { host?: string; port: number }, options: { timer?: ProxyTimer } = {}): Promise<TcpProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const proxy = new TcpProxy(server, (server.address() as AddressInfo).port, { host: target.host ?? '127.0.0.1', port: target.port }, options.timer ?? realTimer);
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  /** `host:port` clients connect to. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get mode(): ProxyMode {
    return this.modeValue;
  }

  /** Connections forwarded and connections reset at once, so far. */
  get counts(): { readonly accepted: number; readonly refused: number; readonly open: number } {
    return { accepted: this.acceptedCount, refused: this.refusedCount, open: this.open.size };
  }

  /** Switches mode for what comes next; `cut` also resets every open connection now. */
  setMode(mode: ProxyMode): void {
    this.modeValue = mode;
    if (mode.kind === 'cut') for (const pair of [...this.open]) this.drop(pair);
  }

  /** Stops listening and resets every connection. */
  async close(): Promise<void> {
    for (const pair of [...this.open]) this.drop(pair);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.modeValue.kind === 'refuse' || this.modeValue.kind === 'cut') {
      this.refusedCount += 1;
      client.resetAndDestroy();
      return;
    }
    this.acceptedCount += 1;
    const upstream = connect(this.target.port, this.target.host);
    const pair = { client, upstream };
    this.open.add(pair);
    this.pipe(client, upstream, pair, true);
    this.pipe(upstream, client, pair, false);
    const end = (): void => this.drop(pair);
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  }

  /** Forwards `from` to `to` in order, each chunk toward the target after the delay of the mode it arrived in. */
  private pipe(from: Socket, to: Socket, pair: { client: Socket; upstream: Socket }, towardTarget: boolean): void {
    let chain = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      const mode = this.modeValue;
      const held = mode.kind === 'delay' && towardTarget ? new Promise<void>((resolve) => this.timer(mode.delayMs, resolve)) : Promise.resolve();
      chain = chain.then(() => held).then(() => {
        if (this.open.has(pair) && !to.destroyed) to.write(chunk);
      });
    });
    from.on('end', () => {
      chain = chain.then(() => {
        if (!to.destroyed) to.end();
      });
    });
  }

  private drop(pair: { client: Socket; upstream: Socket }): void {
    if (!this.open.delete(pair)) return;
    if (!pair.client.destroyed) pair.client.resetAndDestroy();
    if (!pair.upstream.destroyed) pair.upstream.resetAndDestroy();
  }
}

/** A proxy started in `pass` mode in front of `target`; `close()` it when done. */
export function startTcpProxy(target: { host?: string; port: number }, options: { timer?: ProxyTimer } = {}): Promise<TcpProxy> {
  return TcpProxy.start(target, options);
}
