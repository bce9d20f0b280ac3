import { describe, expect, it } from 'vitest';
import { parseRequestHead, unservableHeadPrefix } from './http1-request.parser';

const head = (...lines: string[]): string => lines.join('\r\n');

describe('parseRequestHead', () => {
  it('reads a plain API request: method, target, headers as received and lower-cased, length, keep-alive', () => {
    const r = parseRequestHead(
      head('POST /v1/chat/completions?x=1 HTTP/1.1', 'Host: router', 'Content-Type:application/json', 'Content-Length: 80', 'X-Tag:  a ', 'x-tag: b'),
    );
    expect(r).toEqual({
      ok: true,
      head: {
        method: 'POST',
        url: '/v1/chat/completions?x=1',
        rawHeaders: ['Host', 'router', 'Content-Type', 'application/json', 'Content-Length', '80', 'X-Tag', 'a', 'x-tag', 'b'],
        headers: expect.objectContaining({ host: 'router', 'content-type': 'application/json', 'content-length': '80', 'x-tag': 'a, b' }),
        contentLength: 80,
        keepAlive: true,
      },
    });
  });

  it('treats a missing Content-Length as no body, and Connection: close as the last request', () => {
    const r = parseRequestHead(head('GET /v1/models HTTP/1.1', 'Host: r', 'Connection: Keep-Alive, close'));
    expect(r.ok && r.head.contentLength).toBe(0);
    expect(r.ok && r.head.keepAlive).toBe(false);
    expect(r.ok && r.head.method).toBe('GET');
  });

  it('keeps a header named __proto__ as a header, not a prototype', () => {
    const r = parseRequestHead(head('POST /v1/completions HTTP/1.1', 'Host: r', '__proto__: x'));
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.head.headers.__proto__).toBe('x');
      expect(Object.getPrototypeOf(r.head.headers)).toBeNull();
    }
  });

  // Each of these goes to Node's HTTP server, which accepts or refuses it by its own rules.
  it.each([
    ['HTTP/1.0', head('POST /v1/chat/completions HTTP/1.0', 'Content-Length: 2'), 'not HTTP/1.1'],
    ['another method', head('PUT /v1/chat/completions HTTP/1.1'), 'method PUT'],
    ['HEAD', head('HEAD /v1/models HTTP/1.1'), 'method HEAD'],
    ['a path outside /v1', head('GET /metrics HTTP/1.1'), 'not an /v1 target'],
    ['a /v1-lookalike path', head('POST /v1x HTTP/1.1'), 'not an /v1 target'],
    ['a target with a non-ASCII byte', head('POST /v1/\u00e9 HTTP/1.1'), 'not an /v1 target'],
    ['a request line without a version', head('POST /v1/chat/completions'), 'malformed request line'],
    ['a chunked upload', head('POST /v1/embeddings HTTP/1.1', 'Transfer-Encoding: chunked'), 'transfer-encoding'],
    ['Content-Length with Transfer-Encoding', head('POST /v1/embeddings HTTP/1.1', 'Content-Length: 5', 'Transfer-Encoding: chunked'), 'transfer-encoding'],
    ['two Content-Length headers', head('POST /v1/embeddings HTTP/1.1', 'Content-Length: 5', 'Content-Length: 5'), 'Content-Length repeated or not a number'],
    ['a signed Content-Length', head('POST /v1/embeddings HTTP/1.1', 'Content-Length: +5'), 'Content-Length repeated or not a number'],
    ['Expect: 100-continue', head('POST /v1/embeddings HTTP/1.1', 'Expect: 100-continue'), 'expect'],
    ['Upgrade', head('GET /v1/models HTTP/1.1', 'Upgrade: websocket'), 'upgrade'],
    ['Connection: upgrade', head('GET /v1/models HTTP/1.1', 'Connection: Upgrade'), 'connection upgrade'],
    ['obsolete line folding', head('POST /v1/embeddings HTTP/1.1', 'X-A: 1', ' X-B: folded'), 'malformed header name'],
    ['a line without a colon', head('POST /v1/embeddings HTTP/1.1', 'no colon here'), 'malformed header line'],
    ['an empty header name', head('POST /v1/embeddings HTTP/1.1', ': x'), 'malformed header line'],
    ['a space before the colon', head('POST /v1/embeddings HTTP/1.1', 'X-A : 1'), 'malformed header name'],
    ['a bare LF inside a value', head('POST /v1/embeddings HTTP/1.1', 'X-A: 1\nContent-Length: 9'), 'control character in a header value'],
    ['a NUL in a value', head('POST /v1/embeddings HTTP/1.1', 'X-A: a\0b'), 'control character in a header value'],
    ['a request without Host', head('POST /v1/embeddings HTTP/1.1', 'Content-Length: 2'), 'no Host header'],
  ])('hands over %s', (_what, text, reason) => {
    expect(parseRequestHead(text)).toEqual({ ok: false, reason });
  });
});

describe('unservableHeadPrefix', () => {
  const check = (text: string): string | undefined => unservableHeadPrefix(Buffer.from(text, 'latin1'), 0, text.length);

  it.each([
    ['G', undefined],
    ['POS', undefined],
    ['POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: a\tb\r', undefined],
    ['GET /v1/models HTTP/1.1\r\n', undefined],
    ['PUT /v1/models HTTP/1.1\r\n', 'method not GET or POST'],
    ['\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03', 'method not GET or POST'],
    ['garbage bytes', 'method not GET or POST'],
    ['GET /v1/models HTTP/1.1\nHost: x\n', 'bare LF in the request head'],
    ['GET /v1/models HTTP/1.1\rHost: x', 'CR without LF in the request head'],
    ['POST /v1/models HTTP/1.1\r\nX-A: \x01', 'control character in the request head'],
  ])('%j → %s', (text, reason) => {
    expect(check(text)).toBe(reason);
  });

  it('judges a head arriving a byte at a time as it would judge it whole, a CR split from what follows included', () => {
    for (const text of ['GET /v1/models HTTP/1.1\rHost: x', 'GET /v1/models HTTP/1.1\nHost', 'POST /v1/x HTTP/1.1\r\nHost: y\r\n', 'GEX']) {
      const bytes = Buffer.from(text, 'latin1');
      let reason: string | undefined;
      for (let to = 1; to <= bytes.length && reason === undefined; to++) reason = unservableHeadPrefix(bytes, to - 1, to);
      expect(reason).toBe(check(text));
    }
  });
});
