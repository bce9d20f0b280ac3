import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { rawErrorResponse, type RouterErrorKind } from '../api/openai-error.mapper';
import type { ApiRequest, ApiResponse, BodyLimits } from './api-exchange';
import { MAX_HEAD_BYTES, scanRequestHead, type FastRequestHead } from './http1-request.parser';
import { CR_LF_NUL, joinForWrite } from './http1.syntax';

/**
 * Front-end settings; sizes in bytes, times in milliseconds. A larger declared body than
 * `maxBodyBytes`, or one `readBody` refuses, is dispatched unread and the connection closed
 * after the answer.
 */
export interface FastFrontendOptions extends BodyLimits {
  /** An idle keep-alive connection is closed after this long. */
  readonly keepAliveTimeoutMs: number;
  /** Longest a request head may take to arrive; past it the client gets 408 and the connection closes (Node's headersTimeout). */
  readonly headersTimeoutMs: number;
  /** Longest a whole request, head and body, may take to arrive; then 408 likewise (Node's requestTimeout). */
  readonly requestTimeoutMs: number;
  /**
   * A body arriving slower than this on average (bytes per second, counted from the end of its
   * head) once `bodyRateGraceMs` has passed gets 408 and the connection closes; 0 = no floor.
   */
  readonly minBodyBytesPerSecond: number;
  readonly bodyRateGraceMs: number;
  /** Milliseconds on any steady clock (timeouts only). */
  readonly now: () => number;
  /** A connection went to Node's HTTP server; `reason` is for debugging. */
  readonly onHandover?: (reason: string) => void;
}

/** One request read by the front end, body included. */
export class FastRequest implements ApiRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string | undefined>;
  readonly rawHeaders: string[];

  constructor(
    head: FastRequestHead,
    /** The whole body; empty when it was not read (declared length over the limit, or `readBody` said no). */
    readonly body: Buffer,
    readonly bodyTooLarge: boolean,
  ) {
    this.method = head.method;
    this.url = head.url;
    this.headers = head.headers;
    this.rawHeaders = head.rawHeaders;
  }
}

/** Serves one request (never throws; always ends or destroys the response). */
export type FastHandler = (req: FastRequest, res: FastResponse) => void;

const EMPTY = Buffer.alloc(0);

let dateSecond = -1;
let dateText = '';
/** The IMF-fixdate for `ms`, recomputed once a second. */
function httpDate(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(second * 1000).toUTCString();
  }
  return dateText;
}

/**
 * The response to one fast-path request: the part of ServerResponse the proxy uses. The head
 * leaves with the first body bytes (one write for a small answer); without Content-Length the
 * body is chunked. `close` runs when the client goes away before the response ended; `drain`
 * once when the socket can take more after `write` returned false.
 */
export class FastResponse implements ApiResponse {
  headersSent = false;
  writableFinished = false;
  private head: string | undefined;
  private chunked = false;
  private bodyless = false;
  private onClose: (() => void) | undefined;
  private onDrain: (() => void) | undefined;

  constructor(private readonly conn: FastConnection) {}

  /** The client's socket (ServerResponse has it too). */
  get socket(): Socket {
    return this.conn.socket;
  }

  writeHead(status: number, headers: readonly string[] | Readonly<Record<string, string | number>>): this {
    if (this.headersSent) throw new Error('response head already sent');
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    let length = false;
    let date = false;
    const add = (name: string, value: string): void => {
      if (CR_LF_NUL.test(value)) throw new Error(`invalid character in response header ${name}`);
      switch (name.length === 4 || name.length === 10 || name.length === 14 || name.length === 17 ? name.toLowerCase() : '') {
        case 'content-length':
          length = true;
          break;
        case 'date':
          date = true;
          break;
        case 'connection':
          // The front end frames the connection itself; a handler asking to close is honoured.
          if (value.toLowerCase().includes('close')) this.conn.keepAlive = false;
          return;
        case 'transfer-encoding':
          return;
      }
      head += `${name}: ${value}\r\n`;
    };
    if (Array.isArray(headers)) {
      const list = headers as readonly string[];
      for (let i = 0; i < list.length; i += 2) add(list[i], list[i + 1]);
    } else {
      const record = headers as Readonly<Record<string, string | number>>;
      for (const name of Object.keys(record)) add(name, String(record[name]));
    }
    if (!date) head += `date: ${httpDate(this.conn.frontend.options.now())}\r\n`;
    this.bodyless = status === 204 || status === 304 || status < 200;
    if (!length && !this.bodyless) {
      this.chunked = true;
      head += 'transfer-encoding: chunked\r\n';
    }
    if (!this.conn.keepAlive) head += 'connection: close\r\n';
    this.head = `${head}\r\n`;
    this.headersSent = true;
    return this;
  }

  /** Writes a body piece; false when the socket is backed up (wait for `drain`). */
  write(chunk: Buffer): boolean {
    if (this.writableFinished) return false;
    if (!this.headersSent) this.writeHead(200, []);
    if (chunk.length === 0 || this.bodyless) return true;
    return this.conn.send(this.takeHead(), chunk, this.chunked, false, undefined);
  }

  /** Writes the last piece (if any) and ends the response; `done` runs once it is handed to the OS. */
  end(chunk?: Buffer | string, done?: () => void): this {
    if (this.writableFinished) return this;
    if (!this.headersSent) this.writeHead(200, []);
    const body = chunk === undefined || this.bodyless ? EMPTY : typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    this.writableFinished = true;
    this.conn.send(this.takeHead(), body, this.chunked, true, done);
    this.conn.responseDone();
    return this;
  }

  /** Drops the connection at once. */
  destroy(): void {
    this.conn.socket.destroy();
  }

  on(event: 'close', listener: () => void): this {
    if (event === 'close') this.onClose = listener;
    return this;
  }

  once(event: 'drain', listener: () => void): this {
    if (event === 'drain') this.onDrain = listener;
    return this;
  }

  /** @internal The client went away before the response ended. */
  closed(): void {
    const listener = this.onClose;
    this.onClose = undefined;
    listener?.();
  }

  /** @internal The socket took the backlog. */
  drained(): void {
    const listener = this.onDrain;
    this.onDrain = undefined;
    listener?.();
  }

  private takeHead(): string {
    const head = this.head ?? '';
    this.head = undefined;
    return head;
  }
}

type ConnectionState = 'idle' | 'reading' | 'busy' | 'closing' | 'gone';

/** One client connection served by the front end: reads requests one at a time (pipelined ones wait their turn). */
class FastConnection {
  state: ConnectionState = 'idle';
  /** When the connection became idle, or began receiving the request being read. */
  since: number;
  keepAlive = true;
  private pending: Buffer | undefined;
  private head: FastRequestHead | undefined;
  private bodyStart = 0;
  private bodyParts: Buffer[] | undefined;
  private bodyHave = 0;
  /** When the head of the request being read was complete (the body-rate floor counts from it). */
  private bodySince = 0;
  /** How much of `pending` has been found able to start a fast-path head (see unservableHeadPrefix). */
  private headChecked = 0;
  private response: FastResponse | undefined;
  private dispatching = false;
  private paused = false;
  /** Answers are waiting in the socket for a client that does not read: no new request is read until 'drain'. */
  private backedUp = false;

  constructor(
    readonly frontend: FastHttpFrontend,
    readonly socket: Socket,
  ) {
    this.since = frontend.options.now();
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('drain', this.onDrain);
    socket.on('error', this.onError);
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.state === 'closing' || this.state === 'gone') return;
    // While an answer is pending the rest of an unread (too large) body is dropped, not kept.
    if (this.state === 'busy' && !this.keepAlive) return;
    if (this.state === 'reading' && this.bodyParts !== undefined) {
      this.collectBody(chunk);
      return;
    }
    this.pending = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk]);
    if (this.state === 'idle') {
      this.state = 'reading';
      this.since = this.frontend.options.now();
    }
    if (this.state === 'reading') this.parse();
    else if (this.state === 'busy' && this.pending.length > MAX_HEAD_BYTES) {
      // A client pipelining ahead waits for its earlier answers before sending more.
      this.pause();
    }
  };

  private readonly onEnd = (): void => {
    // Like Node's server (httpAllowHalfOpen off): a client that stops sending is gone.
    if (this.state === 'idle') this.socket.destroySoon();
    else this.socket.destroy();
  };

  private readonly onClose = (): void => {
    const response = this.response;
    this.state = 'gone';
    this.response = undefined;
    this.pending = undefined;
    this.bodyParts = undefined;
    this.frontend.forget(this);
    if (response !== undefined && !response.writableFinished) response.closed();
  };

  private readonly onDrain = (): void => {
    if (this.backedUp) {
      this.backedUp = false;
      this.resume();
      this.parse();
      return;
    }
    this.response?.drained();
  };

  private readonly onError = (): void => {
    // 'close' follows and does the cleanup.
  };

  /** Parses and dispatches buffered requests until one is in flight or the buffer runs out. */
  private parse(): void {
    for (;;) {
      const buf = this.pending;
      if (this.state !== 'reading' || buf === undefined || this.backedUp) return;
      if (this.head === undefined) {
        const scan = scanRequestHead(buf, this.headChecked);
        if (scan.state === 'partial') {
          this.headChecked = scan.checked;
          return;
        }
        if (scan.state === 'handover') {
          this.handOver(scan.reason);
          return;
        }
        this.headChecked = 0;
        this.head = scan.head;
        this.bodyStart = scan.bodyStart;
        this.bodySince = this.frontend.options.now();
        const { maxBodyBytes, readBody } = this.frontend.options;
        if (scan.head.contentLength > maxBodyBytes || (scan.head.contentLength > 0 && readBody !== undefined && !readBody(scan.head))) {
          // Not read: the handler refuses it (413, 401) and the connection closes after the answer.
          this.pending = undefined;
          this.head = undefined;
          this.dispatch(scan.head, EMPTY, false);
          return;
        }
      }
      const need = this.bodyStart + this.head.contentLength;
      if (buf.length < need) {
        // The body is still arriving: its pieces are kept apart and joined once, not re-copied per piece.
        this.bodyParts = [buf.subarray(this.bodyStart)];
        this.bodyHave = buf.length - this.bodyStart;
        this.pending = undefined;
        return;
      }
      const body = buf.subarray(this.bodyStart, need);
      this.pending = buf.length > need ? buf.subarray(need) : undefined;
      const head = this.head;
      this.head = undefined;
      this.dispatch(head, body, head.keepAlive);
    }
  }

  /** A piece of a body being collected; the whole body goes to the handler once it is here. */
  private collectBody(chunk: Buffer): void {
    const head = this.head as FastRequestHead;
    const parts = this.bodyParts as Buffer[];
    const missing = head.contentLength - this.bodyHave;
    if (chunk.length < missing) {
      parts.push(chunk);
      this.bodyHave += chunk.length;
      return;
    }
    parts.push(chunk.subarray(0, missing));
    this.bodyParts = undefined;
    this.head = undefined;
    this.pending = chunk.length > missing ? chunk.subarray(missing) : undefined;
    this.dispatch(head, Buffer.concat(parts, head.contentLength), head.keepAlive);
    this.parse();
  }

  private dispatch(head: FastRequestHead, body: Buffer, keepAlive: boolean): void {
    this.state = 'busy';
    this.keepAlive = keepAlive && !this.frontend.draining;
    const response = new FastResponse(this);
    this.response = response;
    this.dispatching = true;
    try {
      this.frontend.handler(new FastRequest(head, body, head.contentLength > this.frontend.options.maxBodyBytes), response);
    } finally {
      this.dispatching = false;
    }
  }

  /** @internal Writes head (may be ''), body and chunk framing in as few writes as possible. */
  send(head: string, body: Buffer, chunked: boolean, last: boolean, done: (() => void) | undefined): boolean {
    const socket = this.socket;
    if (this.state === 'gone' || socket.destroyed) return false;
    let prefix = head;
    let suffix = '';
    if (chunked) {
      if (body.length > 0) {
        prefix += `${body.length.toString(16)}\r\n`;
        suffix = '\r\n';
      }
      if (last) suffix += '0\r\n\r\n';
    }
    const parts = joinForWrite(prefix, body, suffix);
    if (parts.length === 1) return socket.write(parts[0], done);
    socket.cork();
    let ok = true;
    for (let i = 0; i < parts.length; i++) ok = socket.write(parts[i], i === parts.length - 1 ? done : undefined);
    socket.uncork();
    return ok;
  }

  /** @internal The response ended: close, or go on with the next request. */
  responseDone(): void {
    this.response = undefined;
    if (this.state === 'gone') return;
    if (!this.keepAlive || this.state === 'closing') {
      this.state = 'closing';
      this.since = this.frontend.options.now();
      this.pending = undefined;
      // Closed once the answer is flushed, whether or not the client ever closes its side.
      this.socket.destroySoon();
      return;
    }
    this.state = this.pending === undefined ? 'idle' : 'reading';
    this.since = this.frontend.options.now();
    if (this.socket.writableNeedDrain) {
      // The client is not reading its answers: read no more requests until it does.
      this.backedUp = true;
      this.pause();
      return;
    }
    this.resume();
    if (!this.dispatching) this.parse();
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  private resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  /** Gives the connection, with what it has sent so far, to Node's HTTP server. */
  private handOver(reason: string): void {
    const socket = this.socket;
    socket.removeListener('data', this.onData);
    socket.removeListener('end', this.onEnd);
    socket.removeListener('close', this.onClose);
    socket.removeListener('drain', this.onDrain);
    socket.removeListener('error', this.onError);
    const buffered = this.pending;
    this.pending = undefined;
    this.state = 'gone';
    this.frontend.forget(this);
    this.frontend.toNode(socket, buffered, reason);
  }

  /** @internal Idle past the keep-alive timeout, or a request that takes too long to arrive (or whose body trickles). */
  expire(now: number): void {
    const { keepAliveTimeoutMs, headersTimeoutMs, requestTimeoutMs, minBodyBytesPerSecond, bodyRateGraceMs } = this.frontend.options;
    // 'closing': we ended our side; a client that never ends its side is dropped.
    if (this.state === 'idle' || this.state === 'closing') {
      if (now - this.since >= keepAliveTimeoutMs) this.socket.destroy();
      return;
    }
    if (this.state !== 'reading') return;
    if (this.head === undefined) {
      if (now - this.since >= headersTimeoutMs) this.refuse(now, 'request_timeout', `The request head did not arrive within ${headersTimeoutMs} ms.`);
      return;
    }
    if (now - this.since >= requestTimeoutMs) {
      this.refuse(now, 'request_timeout', `The request did not arrive within ${requestTimeoutMs} ms.`);
      return;
    }
    const bodyMs = now - this.bodySince;
    if (minBodyBytesPerSecond > 0 && bodyMs >= bodyRateGraceMs && this.bodyHave * 1000 < minBodyBytesPerSecond * bodyMs) {
      this.refuse(now, 'request_timeout', `The request body arrived slower than the minimum of ${minBodyBytesPerSecond} bytes/s.`);
    }
  }

  /** Answers the request being read with an OpenAI-shaped error and closes; what it sent so far is dropped. */
  private refuse(now: number, kind: RouterErrorKind, message: string): void {
    this.state = 'closing';
    this.since = now;
    this.pending = undefined;
    this.bodyParts = undefined;
    this.head = undefined;
    this.socket.end(rawErrorResponse(kind, message));
    this.socket.destroySoon();
  }

  /** @internal Shutting down: an idle connection closes now, a busy one after its answer. */
  drain(): void {
    this.keepAlive = false;
    if (this.state === 'idle') {
      this.state = 'closing';
      this.since = this.frontend.options.now();
      this.socket.destroySoon();
    }
  }
}

/**
 * The router's own HTTP/1.1 front end for the API: it takes every new connection of the HTTP
 * server, reads `GET`/`POST /v1/...` requests itself (head and whole body, one request at a
 * time; pipelined ones wait) and hands them to the proxy with light request/response objects
 * instead of Node's IncomingMessage/ServerResponse streams, which cost more than the rest of a
 * proxied request together. The first request it would not serve (see parseRequestHead: other
 * paths such as /metrics, HTTP/1.0, chunked uploads, no Host, anything malformed — as soon as the
 * first bytes show it, not when the head is complete) hands the connection,
 * bytes read so far included, to Node's HTTP server for good, so Node's parser keeps deciding
 * everything unusual and health checks and metrics keep going through Express.
 *
 * Keep-alive, the request deadline and shutdown are handled here for its connections: idle
 * ones close after `keepAliveTimeoutMs` (checked on a sweep, at most once a second), `drain()` closes idle ones and
 * lets busy ones finish with `Connection: close`, `close()` drops the rest.
 */
export class FastHttpFrontend {
  /** @internal */
  draining = false;
  private readonly connections = new Set<FastConnection>();
  private readonly nodeListeners: ((socket: Socket) => void)[];
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly server: Server,
    readonly handler: FastHandler,
    readonly options: FastFrontendOptions,
  ) {
    this.nodeListeners = server.listeners('connection') as ((socket: Socket) => void)[];
    server.removeAllListeners('connection');
    server.on('connection', (socket: Socket) => this.connections.add(new FastConnection(this, socket)));
    // Timeouts are checked on a sweep (at most once a second), not with a timer per socket.
    const floor = options.minBodyBytesPerSecond > 0 ? options.bodyRateGraceMs / 2 : Number.POSITIVE_INFINITY;
    const every = Math.max(10, Math.min(1_000, options.keepAliveTimeoutMs / 2, options.headersTimeoutMs / 2, floor));
    this.sweep = setInterval(() => {
      const now = options.now();
      for (const c of this.connections) c.expire(now);
    }, every);
    this.sweep.unref();
  }

  /** Connections the front end is serving now. */
  get size(): number {
    return this.connections.size;
  }

  /** Stop keeping connections alive: idle ones close now, busy ones after their response. */
  drain(): void {
    this.draining = true;
    for (const c of this.connections) c.drain();
  }

  /** Drops every connection still open (after the server stopped listening and the grace period). */
  close(): void {
    clearInterval(this.sweep);
    for (const c of this.connections) c.socket.destroy();
    this.connections.clear();
  }

  /** @internal */
  forget(connection: FastConnection): void {
    this.connections.delete(connection);
  }

  /** @internal Node's HTTP server takes the socket as if it had just connected, then parses what was already read. */
  toNode(socket: Socket, buffered: Buffer | undefined, reason: string): void {
    this.options.onHandover?.(reason);
    if (socket.isPaused()) socket.resume();
    for (const listener of this.nodeListeners) listener.call(this.server, socket);
    if (buffered !== undefined) socket.emit('data', buffered);
  }
}
