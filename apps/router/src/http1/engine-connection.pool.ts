import { connect, type Socket } from 'node:net';
import { Http1ResponseParser, type ResponseHead } from './http1-response.parser';

/** Where an engine listens. `key` (host:port) names its pool of connections. */
export interface EngineAddress {
  readonly hostname: string;
  readonly port: number;
  readonly key: string;
}

/** Why an exchange with an engine failed. */
export type EngineFailureKind = 'connect' | 'reset' | 'timeout' | 'protocol';

/** A failed exchange: the kind, and whether it happened on a reused connection and after the response head. */
export class EngineRequestError extends Error {
  constructor(
    message: string,
    readonly kind: EngineFailureKind,
    /** The connection had served earlier requests (a reset before any answer may just be a stale pooled connection). */
    readonly reused: boolean,
    /** The response head had been received (the response to the client may have started). */
    readonly headReceived: boolean,
  ) {
    super(message);
    this.name = 'EngineRequestError';
  }
}

/** Receives one response. Exactly one of `onEnd`/`onError` is called, once, unless the call is aborted. */
export interface EngineResponseHandler {
  onHead(head: ResponseHead): void;
  /** A body piece (de-chunked). Call `pause()` on the call for backpressure, `resume()` later. */
  onBody(piece: Buffer): void;
  onEnd(): void;
  onError(error: EngineRequestError): void;
}

/** Time limits of one call, milliseconds. */
export interface EngineCallTimeouts {
  /** From the request written (or the connection made) to the response head. */
  readonly firstByteMs: number;
  /** Longest silence once the response has started. */
  readonly idleMs: number;
}

/** Pool settings, milliseconds. */
export interface EnginePoolOptions {
  readonly connectTimeoutMs: number;
  /** An idle pooled connection is closed after this long (before the engine's own keep-alive timeout can close it under a request). */
  readonly idleSocketTimeoutMs: number;
  /** Idle connections kept per engine; more are closed when they come back. */
  readonly maxIdlePerEngine: number;
}

/** One TCP connection to an engine, with listeners installed once and routed to the current call. */
class PooledConnection {
  call: EngineCall | undefined;
  connected = false;
  served = 0;

  constructor(
    readonly socket: Socket,
    readonly address: EngineAddress,
    private readonly pool: EnginePool,
  ) {
    socket.on('connect', () => {
      this.connected = true;
      if (this.call !== undefined) socket.setTimeout(this.call.timeouts.firstByteMs);
    });
    socket.on('data', (chunk: Buffer) => {
      if (this.call !== undefined) this.call.onData(chunk);
      else socket.destroy(); // unasked-for bytes on an idle connection: it cannot be trusted
    });
    socket.on('end', () => this.call?.onPeerEnd());
    socket.on('error', (error: Error & { code?: string }) => this.call?.onSocketError(error));
    socket.on('close', () => {
      this.call?.onPeerEnd();
      this.pool.forget(this);
    });
    socket.on('timeout', () => {
      if (this.call !== undefined) this.call.onTimeout();
      else socket.destroy();
    });
  }
}

/**
 * One request/response on a pooled connection. The request bytes are written at once; the
 * response is parsed as it arrives and handed to the handler; on completion a reusable
 * connection goes back to the pool, anything else is closed.
 */
export class EngineCall {
  private readonly parser: Http1ResponseParser;
  private headReceived = false;
  private settled = false;

  constructor(
    private readonly conn: PooledConnection,
    private readonly handler: EngineResponseHandler,
    readonly timeouts: EngineCallTimeouts,
    /** The connection had served an earlier request. */
    readonly reused: boolean,
    private readonly pool: EnginePool,
  ) {
    this.parser = new Http1ResponseParser({
      head: (head) => {
        this.headReceived = true;
        conn.socket.setTimeout(timeouts.idleMs);
        handler.onHead(head);
      },
      body: (piece) => handler.onBody(piece),
      complete: () => undefined,
    });
  }

  /** Stops reading the response (backpressure). */
  pause(): void {
    this.conn.socket.pause();
  }

  resume(): void {
    this.conn.socket.resume();
  }

  /** Drops the exchange (the client went away): the connection is closed, no handler is called again. */
  abort(): void {
    if (this.settled) return;
    this.settled = true;
    this.conn.call = undefined;
    this.conn.socket.destroy();
  }

  /** @internal */
  onData(chunk: Buffer): void {
    if (this.settled) return;
    let leftover: number;
    try {
      leftover = this.parser.feed(chunk);
    } catch (error) {
      this.fail('protocol', error instanceof Error ? error.message : String(error));
      return;
    }
    if (this.parser.done && !this.settled) this.complete(leftover === 0 && this.parser.reusable);
  }

  /** @internal the engine closed its side, or the connection is gone. */
  onPeerEnd(): void {
    if (this.settled) return;
    if (this.parser.closeDelimited) {
      this.parser.end();
      this.complete(false);
      return;
    }
    this.fail('reset', this.headReceived ? 'the engine closed the connection in the middle of the response' : 'the engine closed the connection before answering');
  }

  /** @internal */
  onSocketError(error: Error & { code?: string }): void {
    if (this.settled) return;
    const kind: EngineFailureKind = this.conn.connected ? (error.code === 'ETIMEDOUT' ? 'timeout' : 'reset') : 'connect';
    this.fail(kind, `${error.code ?? 'error'}: ${error.message}`);
  }

  /** @internal */
  onTimeout(): void {
    if (this.settled) return;
    if (!this.conn.connected) this.fail('connect', `no connection within ${this.pool.options.connectTimeoutMs} ms`);
    else if (!this.headReceived) this.fail('timeout', `no response within ${this.timeouts.firstByteMs} ms`);
    else this.fail('timeout', `no data for ${this.timeouts.idleMs} ms in the middle of the response`);
  }

  private complete(reusable: boolean): void {
    this.settled = true;
    this.conn.call = undefined;
    this.conn.served++;
    if (reusable) this.pool.release(this.conn);
    else this.conn.socket.destroy();
    this.handler.onEnd();
  }

  private fail(kind: EngineFailureKind, message: string): void {
    this.settled = true;
    this.conn.call = undefined;
    this.conn.socket.destroy();
    this.handler.onError(new EngineRequestError(message, kind, this.reused, this.headReceived));
  }
}

/**
 * Keep-alive HTTP/1.1 connections to engines, one pool per engine address, most recently used
 * first. Much lighter than Node's http.Agent + ClientRequest on the hot path: one write per
 * request, a small incremental parser, listeners installed once per connection. Idle
 * connections close after `idleSocketTimeoutMs`; a connection that misbehaves is closed, never
 * reused.
 */
export class EnginePool {
  private readonly idle = new Map<string, PooledConnection[]>();
  /** Connections carrying a request now. */
  private readonly busy = new Set<PooledConnection>();
  private closed = false;

  constructor(readonly options: EnginePoolOptions) {}

  /**
   * Sends one request (its bytes, e.g. head and body, written together) to `address` on an
   * idle connection if there is one, else a new one.
   */
  request(address: EngineAddress, payload: readonly Buffer[], handler: EngineResponseHandler, timeouts: EngineCallTimeouts): EngineCall {
    let conn: PooledConnection | undefined;
    const list = this.idle.get(address.key);
    while (list !== undefined && list.length > 0) {
      const candidate = list.pop() as PooledConnection;
      if (!candidate.socket.destroyed && candidate.socket.readyState === 'open') {
        conn = candidate;
        break;
      }
      candidate.socket.destroy();
    }
    const reused = conn !== undefined;
    if (conn === undefined) {
      const socket = connect({ host: address.hostname, port: address.port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 1_000 });
      socket.setTimeout(this.options.connectTimeoutMs);
      conn = new PooledConnection(socket, address, this);
    } else {
      conn.socket.setTimeout(timeouts.firstByteMs);
    }
    const call = new EngineCall(conn, handler, timeouts, reused, this);
    conn.call = call;
    this.busy.add(conn);
    const socket = conn.socket;
    if (payload.length === 1) {
      socket.write(payload[0]);
    } else {
      socket.cork();
      for (const part of payload) socket.write(part);
      socket.uncork();
    }
    return call;
  }

  /** Idle connections per engine (for tests and metrics). */
  idleCount(key: string): number {
    return this.idle.get(key)?.length ?? 0;
  }

  /** Closes every idle connection and refuses to keep any more. */
  destroy(): void {
    this.closed = true;
    for (const list of this.idle.values()) for (const conn of list.splice(0)) conn.socket.destroy();
    this.idle.clear();
  }

  /**
   * Ends every request in flight by closing its connection: each fails as an engine that went
   * away would (before the first byte: an error answer; mid-stream: the stream's SSE error).
   */
  cutBusy(): number {
    const n = this.busy.size;
    for (const conn of [...this.busy]) conn.socket.destroy();
    return n;
  }

  /** @internal a finished, reusable connection comes back. */
  release(conn: PooledConnection): void {
    this.busy.delete(conn);
    if (this.closed) {
      conn.socket.destroy();
      return;
    }
    let list = this.idle.get(conn.address.key);
    if (list === undefined) this.idle.set(conn.address.key, (list = []));
    if (list.length >= this.options.maxIdlePerEngine) {
      conn.socket.destroy();
      return;
    }
    conn.socket.setTimeout(this.options.idleSocketTimeoutMs);
    list.push(conn);
  }

  /** @internal a connection closed: drop it from the idle list if it is there. */
  forget(conn: PooledConnection): void {
    this.busy.delete(conn);
    const list = this.idle.get(conn.address.key);
    if (list === undefined) return;
    const i = list.indexOf(conn);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.idle.delete(conn.address.key);
  }
}
