import { isApiPath } from './api-path';
import { TOKEN } from './http1.syntax';

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
 * what is malformed (Node's) and no request-smuggling gap between two parsers.
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
  return { ok: true, head: { method, url, rawHeaders, headers, contentLength, keepAlive } };
}
