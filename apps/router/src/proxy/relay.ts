import type { Logger } from 'pino';
import type { EndpointLease } from '../admission/endpoint.lease';
import { ENGINE_ERROR_BODY_LIMIT, engineErrorBody, sseErrorEvent, type RouterErrorKind } from '../api/openai-error.mapper';
import type { EndpointState } from '../endpoints/endpoint.state';
import type { EngineCall, EngineRequestError, EngineResponseHandler, ResponseHead } from '../http1';
import { JsonUsageTail, SseUsageTap } from '../tenancy/response-usage';
import type { Attempt, Exchange } from './exchange';
import { ROUTE_HEADER, routeHeader, type ProxyOptions } from './proxy.options';
import type { RequestObserver, UpstreamFailure } from './request.observer';
import { onlyPreamble } from './sse-preamble';

/** What a relay needs from the request path it runs in. */
export interface RelayHost {
  readonly options: ProxyOptions;
  readonly observer: RequestObserver;
  readonly logger: Logger;
  /** Leases another endpoint for `ex` after `failed` failed, one it has not tried; undefined when none is left. */
  nextLease(ex: Exchange, failed: EndpointState): EndpointLease | undefined;
  /** Sends `ex` again on `lease` (another endpoint) after `reason`. */
  retry(ex: Exchange, lease: EndpointLease, reason: UpstreamFailure, detail: string): void;
  /** Sends `ex` on `lease` (a new relay). */
  send(ex: Exchange, lease: EndpointLease): void;
  /** Answers `ex` with a router error, unless it has ended. */
  fail(ex: Exchange, kind: RouterErrorKind, message: string): void;
  /** The request is over: settle the key's limits, count it. */
  finish(ex: Exchange, status: number): void;
  /** A step threw: release what `ex` holds, answer 500 (or close a started response). */
  stepFailed(ex: Exchange, error: unknown): void;
  requestId(ex: Exchange): string;
}

/** Response headers never passed back: hop-by-hop (the client connection is framed by its own writer). */
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);
/** Also dropped from an engine's error answer, whose body the router rewrites. */
const DROP_ERROR_RESPONSE = new Set([...DROP_RESPONSE, 'content-type', 'content-length', 'content-encoding']);

/** Largest preamble held back before the response is sent on anyway. */
const MAX_HELD_BYTES = 64 * 1024;

/** A response head and the preamble pieces held back until the first content (see ProxyOptions.holdUntilContentMs). */
interface HeldResponse {
  readonly status: number;
  readonly headers: string[];
  readonly pieces: Buffer[];
  bytes: number;
  timer: NodeJS.Timeout | undefined;
}

/** True when an SSE byte stream chunk ends an event (`\n\n` or `\r\n\r\n`), so another event may follow cleanly. */
function endsWithBlankLine(chunk: Buffer): boolean {
  const n = chunk.length;
  if (n < 2 || chunk[n - 1] !== 0x0a) return false;
  return chunk[n - 2] === 0x0a || (n >= 4 && chunk[n - 2] === 0x0d && chunk[n - 3] === 0x0a);
}

/**
 * The relay stage: one attempt at one leased endpoint. It receives the engine's response and
 * passes it back untouched (SSE included; a non-2xx answer has its body rewritten into the
 * OpenAI error shape, status and message kept). A failure before the first response byte is
 * retried on another endpoint within the budget (a pooled connection the engine had closed is
 * resent once on the same endpoint); after it, an SSE response ends with an OpenAI-shaped error
 * event and a plain one is closed. Its lease is released exactly once, with the outcome.
 */
export class Relay implements EngineResponseHandler, Attempt {
  call: EngineCall | undefined;
  /** The response to the client has started (its head is written); from here a failure cuts it instead of retrying. */
  private responded = false;
  /** Set while the head is held back waiting for the first content. */
  private held: HeldResponse | undefined;

  constructor(
    private readonly host: RelayHost,
    private readonly ex: Exchange,
    readonly lease: EndpointLease,
  ) {}

  /** True once the lease is released: later engine events are ignored. */
  private get settled(): boolean {
    return !this.lease.active;
  }

  // Each engine callback is guarded like ProxyHandler.step, without allocating a closure per body piece.
  onHead(head: ResponseHead): void {
    try {
      this.head(head);
    } catch (error) {
      this.host.stepFailed(this.ex, error);
    }
  }

  onBody(piece: Buffer): void {
    try {
      this.body(piece);
    } catch (error) {
      this.host.stepFailed(this.ex, error);
    }
  }

  onEnd(): void {
    try {
      this.end();
    } catch (error) {
      this.host.stepFailed(this.ex, error);
    }
  }

  onError(error: EngineRequestError): void {
    try {
      this.engineFailed(error);
    } catch (thrown) {
      this.host.stepFailed(this.ex, thrown);
    }
  }

  abandon(): void {
    if (this.settled) return;
    this.settle('abandoned');
    this.call?.abort();
  }

  private head(head: ResponseHead): void {
    const ex = this.ex;
    if (this.settled) return;
    const status = head.status;
    const host = this.host;
    if ((status === 502 || status === 503) && !ex.clientGone && ex.attempts <= host.options.maxRetries) {
      const next = host.nextLease(ex, this.lease.state);
      if (next !== undefined) {
        this.call?.abort();
        this.settle('failure', 'status_5xx');
        host.retry(ex, next, 'status_5xx', `HTTP ${status}`);
        return;
      }
    }
    ex.status = status;
    ex.sse = false;
    ex.fixedLength = false;
    ex.expectedBytes = -1;
    const raw = head.rawHeaders;
    const headers: string[] = [];
    if (status < 200 || status >= 300) {
      // An engine's error: held whole (bounded) and answered in the OpenAI shape at its end.
      for (let i = 0; i < raw.length; i += 2) if (!DROP_ERROR_RESPONSE.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1]);
      // The engine has answered: a break from here on ends with what it said, never a retry.
      this.responded = true;
      host.observer.firstByte(ex.model, (performance.now() - ex.start) / 1000);
      ex.engineError = { headers, pieces: [], bytes: 0 };
      return;
    }
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (DROP_RESPONSE.has(name)) continue;
      if (name === 'content-type' && raw[i + 1].startsWith('text/event-stream')) ex.sse = true;
      else if (name === 'content-length') {
        // Only a length that frames the body is passed on: next to Transfer-Encoding it is void
        // (RFC 9112 §6.3) and the body is sent on chunked.
        if (head.framing !== 'length' && head.framing !== 'none') continue;
        if (head.framing === 'length') {
          ex.fixedLength = true;
          ex.expectedBytes = Number(raw[i + 1]);
        }
      }
      headers.push(raw[i], raw[i + 1]);
    }
    if (ex.key !== undefined) {
      // A stream with a fixed length cannot lose bytes: its usage chunk, if any, stays.
      if (ex.sse) ex.usageTap = new SseUsageTap(ex.stripUsage && !ex.fixedLength);
      else ex.usageTail = new JsonUsageTail();
    }
    if (ex.limits !== undefined) for (const [name, value] of Object.entries(ex.limits.headers)) headers.push(name, value);
    const holdMs = host.options.holdUntilContentMs;
    if (status === 200 && ex.sse && !ex.fixedLength && holdMs > 0 && !ex.clientGone) {
      // 1. Hold the head until the first content: an engine dying before it is then retried elsewhere.
      const held: HeldResponse = { status, headers, pieces: [], bytes: 0, timer: undefined };
      held.timer = setTimeout(() => {
        try {
          this.letGo();
        } catch (error) {
          this.host.stepFailed(this.ex, error);
        }
      }, holdMs);
      this.held = held;
      return;
    }
    this.respond(status, headers);
  }

  /** Starts the client's response: from here a failure cuts it rather than retrying. */
  private respond(status: number, headers: string[]): void {
    const ex = this.ex;
    this.responded = true;
    this.host.observer.firstByte(ex.model, (performance.now() - ex.start) / 1000);
    if (this.host.options.debugHeader === true && ex.reason !== undefined) headers.push(ROUTE_HEADER, routeHeader(this.lease.state.id, ex.reason, ex.attempts - 1));
    ex.res.writeHead(status, headers);
  }

  /** Sends a held head and its preamble on (first content, end of response, or the hold bound). */
  private letGo(): void {
    const held = this.held;
    if (held === undefined || this.settled) return;
    this.held = undefined;
    clearTimeout(held.timer);
    this.respond(held.status, held.headers);
    if (held.bytes > 0) this.forward(held.pieces.length === 1 ? held.pieces[0] : Buffer.concat(held.pieces, held.bytes));
  }

  private body(piece: Buffer): void {
    if (this.settled) return;
    this.lease.outputStarted();
    const held = this.held;
    if (held === undefined) {
      this.forward(piece);
      return;
    }
    // 2. Held: keep the pieces while they are only preamble; let go at the first content.
    held.pieces.push(piece);
    held.bytes += piece.length;
    if (held.bytes > MAX_HELD_BYTES || !onlyPreamble(Buffer.concat(held.pieces, held.bytes).toString('utf8'))) this.letGo();
  }

  /** Passes a body piece to the client as it is, with backpressure. */
  private forward(piece: Buffer): void {
    const ex = this.ex;
    const held = ex.engineError;
    if (held !== undefined) {
      const room = ENGINE_ERROR_BODY_LIMIT - held.bytes;
      if (room > 0) {
        const kept = piece.length > room ? piece.subarray(0, room) : piece;
        held.pieces.push(kept);
        held.bytes += kept.length;
      }
      return;
    }
    if (ex.usageTap !== undefined) {
      piece = ex.usageTap.push(piece);
      if (piece.length === 0) return;
    } else ex.usageTail?.push(piece);
    ex.bytes += piece.length;
    ex.lastChunk = piece;
    if (ex.bytes === ex.expectedBytes) {
      // The whole body is here: head, body and end leave in one write.
      ex.ended = true;
      ex.res.end(piece);
      return;
    }
    if (ex.res.write(piece)) return;
    // Backpressure: a slow client slows the engine's stream, never the router's memory.
    this.call?.pause();
    ex.res.once('drain', (ex.resume ??= () => this.call?.resume()));
  }

  private end(): void {
    if (this.settled) return;
    // A complete response that was all preamble is still a response.
    this.letGo();
    const ex = this.ex;
    const failed = ex.status >= 500;
    this.settle(failed ? 'failure' : 'success', failed ? 'status_5xx' : undefined);
    if (ex.engineError !== undefined) this.answerEngineError();
    else if (!ex.ended) {
      const rest = ex.usageTap?.end();
      ex.res.end(rest !== undefined && rest.length > 0 ? rest : undefined);
    }
    this.host.finish(ex, ex.status);
  }

  /** Answers a held engine error with its status and kept headers, its body in the OpenAI shape. */
  private answerEngineError(): void {
    const ex = this.ex;
    const held = ex.engineError;
    if (held === undefined || ex.clientGone) return;
    ex.engineError = undefined;
    const body = Buffer.from(JSON.stringify(engineErrorBody(ex.status, Buffer.concat(held.pieces, held.bytes))));
    ex.bytes = body.length;
    ex.res.writeHead(ex.status, [...held.headers, 'content-type', 'application/json', 'content-length', String(body.length)]);
    ex.res.end(body);
  }

  private engineFailed(error: EngineRequestError): void {
    if (this.settled) return;
    const ex = this.ex;
    const host = this.host;
    if (this.responded && ex.engineError !== undefined) {
      // The engine's error answer broke off: answer with what it said so far.
      this.settle('failure', 'stream_cut');
      this.call?.abort();
      this.answerEngineError();
      host.finish(ex, ex.status);
      return;
    }
    if (this.responded) {
      this.cut(error.message);
      return;
    }
    const failure: UpstreamFailure = error.kind === 'connect' ? 'connect' : error.kind === 'timeout' ? 'timeout' : 'reset';
    // A pooled connection the engine closed just as it was reused: not the engine failing.
    if (failure === 'reset' && error.reused && !ex.staleRetried && !ex.clientGone) {
      ex.staleRetried = true;
      this.dropHeld();
      const again = this.lease.renew();
      ex.attempts--;
      host.send(ex, again);
      return;
    }
    this.settle('failure', failure);
    if (ex.clientGone) return;
    if (ex.attempts <= host.options.maxRetries) {
      const next = host.nextLease(ex, this.lease.state);
      if (next !== undefined) {
        host.retry(ex, next, failure, error.message);
        return;
      }
    }
    host.logger.warn({ requestId: host.requestId(ex), model: ex.model, replicaId: this.lease.state.id, err: error.message, attempts: ex.attempts }, 'engine request failed before a response; no retry left');
    const kind: RouterErrorKind = failure === 'timeout' ? 'upstream_timeout' : 'upstream_unavailable';
    host.fail(ex, kind, `The engine serving model '${ex.model}' failed before answering (${error.message}); tried ${ex.attempts} endpoint(s).`);
  }

  /** The response already started: end an SSE stream with an error event, close anything else. */
  private cut(detail: string): void {
    const ex = this.ex;
    this.settle('failure', 'stream_cut');
    this.call?.abort();
    this.host.observer.streamCut(ex.model);
    this.host.logger.warn({ requestId: this.host.requestId(ex), model: ex.model, replicaId: this.lease.state.id, err: detail, bytes: ex.bytes }, 'engine response cut after it started');
    if (!ex.clientGone) {
      const res = ex.res;
      if (ex.sse && !ex.fixedLength) {
        const last = ex.lastChunk;
        const atBoundary = last === undefined || endsWithBlankLine(last);
        const event = sseErrorEvent('stream_interrupted', `The engine serving model '${ex.model}' stopped in the middle of the response: ${detail}`);
        // A complete chunked body: the client's connection stays usable. Closing it here raced
        // the client's next request on the same keep-alive connection ("fetch failed").
        res.end(atBoundary ? event : `\n\n${event}`);
      } else {
        res.destroy();
      }
    }
    this.host.finish(ex, ex.status);
  }

  private dropHeld(): void {
    if (this.held === undefined) return;
    clearTimeout(this.held.timer);
    this.held = undefined;
  }

  /** The settle stage for this attempt: the failure counted (before the release, which may forget a removed endpoint's series), then the lease released. */
  private settle(outcome: 'success' | 'failure' | 'abandoned', failure?: UpstreamFailure): void {
    if (this.settled) return;
    this.dropHeld();
    if (failure !== undefined) this.host.observer.upstreamFailed(this.lease.state.id, failure);
    this.lease.release(outcome);
  }
}
