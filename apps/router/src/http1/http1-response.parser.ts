import { CR_LF_NUL, isDigit, TOKEN } from './http1.syntax';

/** How the body of a response is delimited (RFC 9112 §6.3). */
export type BodyFraming = 'none' | 'length' | 'chunked' | 'close';

/** A parsed response head. `rawHeaders` is `[name, value, name, value, ...]` as received. */
export interface ResponseHead {
  readonly status: number;
  readonly rawHeaders: readonly string[];
  readonly framing: BodyFraming;
  /** Whether the connection may carry another request after this response. */
  readonly keepAlive: boolean;
}

/** What the parser reports, in order: one head, body pieces, then completion. */
export interface ResponseParserEvents {
  head(head: ResponseHead): void;
  /** A piece of the (de-chunked) body; a view into the received buffer, valid until the next feed. */
  body(piece: Buffer): void;
  complete(): void;
}

/** The engine sent something that is not HTTP/1.1; the connection cannot be trusted further. */
export class ResponseParseError extends Error {
  readonly code = 'HPE_INVALID';
}

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_CHUNK_LINE = 4 * 1024;
const CRLF_CRLF = Buffer.from('\r\n\r\n');


type State = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-data-end' | 'trailers' | 'close' | 'done';

/**
 * An incremental HTTP/1.1 response parser for one response on a client connection: the head
 * (status, raw headers, framing), then the body de-chunked, then completion. Strict where a
 * proxy must be — obsolete line folding, conflicting Content-Length, malformed chunk sizes and
 * oversized heads are errors, never guesses — and zero-copy for the body. Interim 1xx
 * responses are skipped; 101 is refused (no upgrades through the router).
 */
export class Http1ResponseParser {
  private state: State = 'head';
  private pending: Buffer | undefined;
  private remaining = 0;
  private keepAlive = true;

  constructor(private readonly events: ResponseParserEvents) {}

  /** True once the response is complete (nothing more belongs to it). */
  get done(): boolean {
    return this.state === 'done';
  }

  /** True while the body runs until the connection closes (then `end()` completes it). */
  get closeDelimited(): boolean {
    return this.state === 'close';
  }

  /** Whether the connection may be reused once the response is complete. */
  get reusable(): boolean {
    return this.keepAlive && this.state === 'done';
  }

  /**
   * Feeds received bytes. Returns the number of bytes left over after a complete response
   * (0 normally; more means the peer sent something unasked for). Throws ResponseParseError.
   */
  feed(chunk: Buffer): number {
    let buf = chunk;
    if (this.pending !== undefined) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = undefined;
    }
    let at = 0;
    while (at < buf.length) {
      switch (this.state) {
        case 'head': {
          const end = buf.indexOf(CRLF_CRLF, at);
          if (end < 0) {
            if (buf.length - at > MAX_HEAD_BYTES) throw new ResponseParseError(`response head larger than ${MAX_HEAD_BYTES} bytes`);
            this.pending = buf.subarray(at);
            return 0;
          }
          if (end - at > MAX_HEAD_BYTES) throw new ResponseParseError(`response head larger than ${MAX_HEAD_BYTES} bytes`);
          const text = buf.toString('latin1', at, end);
          at = end + 4;
          this.onHead(text);
          break;
        }
        case 'length': {
          const n = Math.min(this.remaining, buf.length - at);
          this.events.body(buf.subarray(at, at + n));
          at += n;
          this.remaining -= n;
          if (this.remaining === 0) this.finish();
          break;
        }
        case 'close': {
          this.events.body(buf.subarray(at));
          at = buf.length;
          break;
        }
        case 'chunk-size': {
          const lf = buf.indexOf(0x0a, at);
          if (lf < 0) {
            if (buf.length - at > MAX_CHUNK_LINE) throw new ResponseParseError('chunk size line too long');
            this.pending = buf.subarray(at);
            return 0;
          }
          if (lf - at > MAX_CHUNK_LINE) throw new ResponseParseError('chunk size line too long');
          if (lf === at || buf[lf - 1] !== 0x0d) throw new ResponseParseError('chunk size line not ended by CRLF');
          const line = buf.toString('latin1', at, lf - 1);
          at = lf + 1;
          const m = /^([0-9a-fA-F]{1,12})[ \t]*(;.*)?$/.exec(line);
          if (m === null) throw new ResponseParseError(`invalid chunk size line ${JSON.stringify(line.slice(0, 40))}`);
          this.remaining = parseInt(m[1], 16);
          this.state = this.remaining === 0 ? 'trailers' : 'chunk-data';
          break;
        }
        case 'chunk-data': {
          const n = Math.min(this.remaining, buf.length - at);
          this.events.body(buf.subarray(at, at + n));
          at += n;
          this.remaining -= n;
          if (this.remaining === 0) this.state = 'chunk-data-end';
          break;
        }
        case 'chunk-data-end': {
          if (buf.length - at < 2) {
            this.pending = buf.subarray(at);
            return 0;
          }
          if (buf[at] !== 0x0d || buf[at + 1] !== 0x0a) throw new ResponseParseError('chunk data not followed by CRLF');
          at += 2;
          this.state = 'chunk-size';
          break;
        }
        case 'trailers': {
          // Trailer fields are read and dropped; an empty line ends the message.
          const lf = buf.indexOf(0x0a, at);
          if (lf < 0) {
            if (buf.length - at > MAX_HEAD_BYTES) throw new ResponseParseError('trailers too long');
            this.pending = buf.subarray(at);
            return 0;
          }
          if (lf === at || buf[lf - 1] !== 0x0d) throw new ResponseParseError('trailer line not ended by CRLF');
          const empty = lf - 1 === at;
          at = lf + 1;
          if (empty) this.finish();
          break;
        }
        case 'done':
          return buf.length - at;
      }
    }
    return 0;
  }

  /** The connection closed: completes a close-delimited body; throws if anything else was cut short. */
  end(): void {
    if (this.state === 'close') {
      this.finish();
      return;
    }
    if (this.state !== 'done') throw new ResponseParseError(`connection closed in the middle of the response (${this.state})`);
  }

  private onHead(text: string): void {
    // Status line: "HTTP/1.x NNN[ reason]". Hand-rolled: this runs once per proxied request.
    const eol = text.indexOf('\r\n');
    const statusLine = eol < 0 ? text : text.slice(0, eol);
    const minor = statusLine.charCodeAt(7);
    if (
      !statusLine.startsWith('HTTP/1.') ||
      (minor !== 0x30 && minor !== 0x31) ||
      statusLine.charCodeAt(8) !== 0x20 ||
      !isDigit(statusLine.charCodeAt(9)) ||
      !isDigit(statusLine.charCodeAt(10)) ||
      !isDigit(statusLine.charCodeAt(11)) ||
      (statusLine.length > 12 && statusLine.charCodeAt(12) !== 0x20)
    ) {
      throw new ResponseParseError(`invalid status line ${JSON.stringify(statusLine.slice(0, 80))}`);
    }
    const status = Number(statusLine.slice(9, 12));
    const rawHeaders: string[] = [];
    let contentLength: number | undefined;
    let chunked = false;
    let transferEncoding = false;
    let keepAlive = minor === 0x31;
    let at = eol < 0 ? text.length : eol + 2;
    while (at < text.length) {
      let end = text.indexOf('\r\n', at);
      if (end < 0) end = text.length;
      if (end === at) {
        at += 2;
        continue;
      }
      const first = text.charCodeAt(at);
      if (first === 0x20 || first === 0x09) throw new ResponseParseError('obsolete header line folding');
      const colon = text.indexOf(':', at);
      if (colon <= at || colon >= end) throw new ResponseParseError(`invalid header line ${JSON.stringify(text.slice(at, Math.min(end, at + 80)))}`);
      for (let i = at; i < colon; i++) {
        if (TOKEN[text.charCodeAt(i)] !== 1) throw new ResponseParseError(`invalid header name ${JSON.stringify(text.slice(at, Math.min(colon, at + 80)))}`);
      }
      const name = text.slice(at, colon);
      const value = text.slice(colon + 1, end).trim();
      if (CR_LF_NUL.test(value)) throw new ResponseParseError(`invalid character in header ${name}`);
      at = end + 2;
      rawHeaders.push(name, value);
      // Only three names matter for framing; compare lower-cased only when the length could match.
      switch (name.length === 14 || name.length === 17 || name.length === 10 ? name.toLowerCase() : '') {
        case 'content-length': {
          if (!/^\d{1,15}$/.test(value)) throw new ResponseParseError(`invalid Content-Length ${JSON.stringify(value)}`);
          const n = Number(value);
          if (contentLength !== undefined && contentLength !== n) throw new ResponseParseError('conflicting Content-Length headers');
          contentLength = n;
          break;
        }
        case 'transfer-encoding': {
          transferEncoding = true;
          const codings = value.toLowerCase().split(',');
          chunked = codings[codings.length - 1].trim() === 'chunked';
          break;
        }
        case 'connection': {
          const tokens = value.toLowerCase().split(',').map((c) => c.trim());
          if (tokens.includes('close')) keepAlive = false;
          else if (tokens.includes('keep-alive')) keepAlive = true;
          break;
        }
      }
    }
    if (status === 101) throw new ResponseParseError('the engine tried to switch protocols');
    if (status < 200) return; // interim response (100 Continue, 103 Early Hints): the real one follows
    let framing: BodyFraming;
    if (status === 204 || status === 304) framing = 'none';
    else if (transferEncoding) framing = chunked ? 'chunked' : 'close';
    else if (contentLength !== undefined) framing = contentLength === 0 ? 'none' : 'length';
    else framing = 'close';
    if (framing === 'close') keepAlive = false;
    this.keepAlive = keepAlive;
    this.events.head({ status, rawHeaders, framing, keepAlive });
    switch (framing) {
      case 'none':
        this.finish();
        break;
      case 'length':
        this.remaining = contentLength as number;
        this.state = 'length';
        break;
      case 'chunked':
        this.state = 'chunk-size';
        break;
      case 'close':
        this.state = 'close';
        break;
    }
  }

  private finish(): void {
    this.state = 'done';
    this.events.complete();
  }
}
