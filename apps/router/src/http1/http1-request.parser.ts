import { isApiPath } from './api-path';
import { CRLF_CRLF, TOKEN } from './http1.syntax';

/** A request head the router's own HTTP/1.1 front end may serve (see `parseRequestHead`). */
export interface FastRequestHead {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  /** `[name, value, name, value, ...]` as received (values trimmed of surrounding blanks). */
  readonly rawHeaders: string[];
  /** Lower-cased names; a repeated header's values joined with ", ". */
  readonly headers: Record<string, string>;
  /** The declared body length (0 when there is no Content-Length). */
  readonly contentLength: number;
  /** False when the client sent `Connection: close`. */
  readonly keepAlive: boolean;
}

/** Parsed, or why the request must go to Node's HTTP server instead (which answers anything odd itself). */
export type RequestHeadResult = { readonly ok: true; readonly head: FastRequestHead } | { readonly ok: false; readonly reason: string };

const handOver = (reason: string): RequestHeadResult => ({ ok: false, reason });

/** Visible ASCII only: no blanks, no controls, no bytes above 0x7e. */
const TARGET = /^[\x21-\x7e]+$/;
/** Control characters a field value must not carry (HTAB is allowed). */
const BAD_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/;
const DIGITS = /^\d{1,15}$/;

/**
 * Parses a request head (`text` = everything before the blank line, read as latin1) for the
 * router's fast path. Deliberately narrow: only `GET`/`POST` of an `/v1` target over HTTP/1.1,
 * well-formed header lines, at most one Content-Length and no Transfer-Encoding, Expect or
 * Upgrade. Everything else — HTTP/1.0, chunked uploads, `100-continue`, obsolete line folding,
 * malformed lines, other paths — is handed to Node's HTTP server, whose parser accepts or
 * refuses it as it does today; the fast path never guesses, so there is one set of rules for
 * what is malformed (Node's) and no request-smuggling gap between two parsers. A head without
 * `Host` goes there too, so the one rule refusing it sits beside Node's.
 */
export function parseRequestHead(text: string): RequestHeadResult {
  const eol = text.indexOf('\r\n');
  const line = eol < 0 ? text : text.slice(0, eol);
  const sp1 = line.indexOf(' ');
  const sp2 = line.indexOf(' ', sp1 + 1);
  if (sp1 < 0 || sp2 < 0) return handOver('malformed request line');
  const method = line.slice(0, sp1);
  if (method !== 'POST' && method !== 'GET') return handOver(`method ${method.slice(0, 16)}`);
  if (line.slice(sp2 + 1) !== 'HTTP/1.1') return handOver('not HTTP/1.1');
  const url = line.slice(sp1 + 1, sp2);
  if (!isApiPath(url) || !TARGET.test(url)) return handOver('not an /v1 target');

  const rawHeaders: string[] = [];
  // No prototype: a header named __proto__ is just a header.
  const headers = Object.create(null) as Record<string, string>;
  let contentLength = 0;
  let lengthSeen = false;
  let keepAlive = true;
  let at = eol < 0 ? text.length : eol + 2;
  while (at < text.length) {
    let end = text.indexOf('\r\n', at);
    if (end < 0) end = text.length;
    const colon = text.indexOf(':', at);
    if (colon <= at || colon >= end) return handOver('malformed header line');
    for (let i = at; i < colon; i++) if (TOKEN[text.charCodeAt(i)] !== 1) return handOver('malformed header name');
    const name = text.slice(at, colon);
    const value = text.slice(colon + 1, end).replace(/^[ \t]+|[ \t]+$/g, '');
    if (BAD_VALUE.test(value)) return handOver('control character in a header value');
    at = end + 2;
    rawHeaders.push(name, value);
    const lower = name.toLowerCase();
    switch (lower) {
      case 'content-length':
        if (lengthSeen || !DIGITS.test(value)) return handOver('Content-Length repeated or not a number');
        lengthSeen = true;
        contentLength = Number(value);
        break;
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return handOver(lower);
      case 'connection': {
        const tokens = value.toLowerCase().split(',').map((t) => t.trim());
        if (tokens.includes('upgrade')) return handOver('connection upgrade');
        if (tokens.includes('close')) keepAlive = false;
        break;
      }
    }
    const seen = headers[lower];
    headers[lower] = seen === undefined ? value : `${seen}, ${value}`;
  }
  // RFC 9112 §3.2: an HTTP/1.1 request without Host is refused; the router's Node listener answers it.
  if (headers.host === undefined) return handOver('no Host header');
  return { ok: true, head: { method, url, rawHeaders, headers, contentLength, keepAlive } };
}

const LF = 0x0a;
const CR = 0x0d;
const HTAB = 0x09;
const FAST_METHODS = ['GET ', 'POST '];

/**
 * Looks at the bytes of a request head still arriving (`buf[from..to)`, `from` being where the
 * previous look stopped) and says why they can no longer become a head the fast path serves:
 * a first line that does not start with `GET ` or `POST `, a line ended by a bare LF or a CR
 * without LF, or a control character. Undefined while they still may. Each byte is looked at
 * once, so a head arriving a byte at a time costs no more than one arriving whole. The caller
 * hands such a connection to Node's HTTP server at once, which refuses what is malformed (400)
 * and serves what is merely unusual — no waiting for a blank line that may never come.
 */
export function unservableHeadPrefix(buf: Uint8Array, from: number, to: number): string | undefined {
  if (from < 5) {
    const line = Math.min(to, 5);
    const viable = FAST_METHODS.some((m) => {
      for (let i = 0; i < Math.min(line, m.length); i++) if (buf[i] !== m.charCodeAt(i)) return false;
      return true;
    });
    if (!viable) return 'method not GET or POST';
  }
  // The byte before `from` again: a CR that ended the previous piece is judged by what follows it.
  for (let i = from > 0 ? from - 1 : 0; i < to; i++) {
    const c = buf[i];
    if (c >= 0x20 && c !== 0x7f) continue;
    if (c === LF) {
      if (i === 0 || buf[i - 1] !== CR) return 'bare LF in the request head';
    } else if (c === CR) {
      if (i + 1 < to && buf[i + 1] !== LF) return 'CR without LF in the request head';
    } else if (c !== HTAB) return 'control character in the request head';
  }
  return undefined;
}

/** Node's default maxHeaderSize: longer heads go to Node, which answers 431. */
export const MAX_HEAD_BYTES = 16 * 1024;

/**
 * Where reading a request head stands: more bytes needed (the first `checked` already looked
 * at), a head the fast path serves (its body starts at `bodyStart`), or why the connection goes
 * to Node's HTTP server.
 */
export type HeadScan =
  | { readonly state: 'partial'; readonly checked: number }
  | { readonly state: 'head'; readonly head: FastRequestHead; readonly bodyStart: number }
  | { readonly state: 'handover'; readonly reason: string };

/**
 * Reads the request head at the start of `buf`, the bytes received so far; `checked` is the
 * previous scan's (0 for a new head). Bytes that can never become a head served here are
 * handed over as soon as they show it (garbage, TLS, bare LFs: an immediate 400 from Node), not
 * after the head timeout. Any split of the same bytes reads the same; no input throws.
 */
export function scanRequestHead(buf: Buffer, checked: number): HeadScan {
  const end = buf.indexOf(CRLF_CRLF);
  if (end < 0 || end > MAX_HEAD_BYTES) {
    if (end > MAX_HEAD_BYTES || buf.length > MAX_HEAD_BYTES) return { state: 'handover', reason: 'request head too large' };
    const unservable = unservableHeadPrefix(buf, checked, buf.length);
    return unservable !== undefined ? { state: 'handover', reason: unservable } : { state: 'partial', checked: buf.length };
  }
  const parsed = parseRequestHead(buf.toString('latin1', 0, end));
  return parsed.ok ? { state: 'head', head: parsed.head, bodyStart: end + 4 } : { state: 'handover', reason: parsed.reason };
}
