import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Http1ResponseParser, ResponseParseError, type ResponseHead } from './http1-response.parser';

interface Seen {
  heads: ResponseHead[];
  body: string;
  complete: number;
  leftover: number;
}

/** Feeds `wire` cut at `cuts` (sorted offsets) and records what the parser reported. */
function parse(wire: string, cuts: readonly number[] = [], close = false): Seen {
  const seen: Seen = { heads: [], body: '', complete: 0, leftover: 0 };
  const parser = new Http1ResponseParser({
    head: (h) => seen.heads.push(h),
    body: (b) => (seen.body += b.toString('latin1')),
    complete: () => seen.complete++,
  });
  const bytes = Buffer.from(wire, 'latin1');
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut < from) continue;
    // Copies, so a parser holding on to an old view would be caught out.
    seen.leftover += parser.feed(Buffer.from(bytes.subarray(from, cut)));
    from = cut;
  }
  if (close) parser.end();
  return seen;
}

const CASES: { name: string; wire: string; close?: boolean; status: number; body: string; framing: string; keepAlive: boolean }[] = [
  {
    name: 'content-length',
    wire: 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}',
    status: 200,
    body: '{"ok":true}',
    framing: 'length',
    keepAlive: true,
  },
  {
    name: 'chunked SSE with extensions and trailers',
    wire: 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5;name=x\r\ndata:\r\nC \r\n {"a":"é"}\n\n\r\n0\r\nX-Trailer: 1\r\n\r\n',
    status: 200,
    body: 'data: {"a":"é"}\n\n',
    framing: 'chunked',
    keepAlive: true,
  },
  {
    name: 'close-delimited body',
    wire: 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end',
    close: true,
    status: 200,
    body: 'until the end',
    framing: 'close',
    keepAlive: false,
  },
  { name: '204 has no body', wire: 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n', status: 204, body: '', framing: 'none', keepAlive: true },
  { name: 'zero length', wire: 'HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n', status: 500, body: '', framing: 'none', keepAlive: false },
  {
    name: 'interim 100 Continue skipped',
    wire: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy',
    status: 503,
    body: 'busy',
    framing: 'length',
    keepAlive: true,
  },
  { name: 'HTTP/1.0 closes unless kept alive', wire: 'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi', status: 200, body: 'hi', framing: 'length', keepAlive: false },
  {
    name: 'transfer-encoding wins over content-length',
    wire: 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n',
    status: 200,
    body: 'hi',
    framing: 'chunked',
    keepAlive: true,
  },
];

describe('Http1ResponseParser', () => {
  it.each(CASES)('$name: whole, and cut at every byte', ({ wire, close, status, body, framing, keepAlive }) => {
    for (let cut = 0; cut <= wire.length; cut++) {
      const seen = parse(wire, [cut], close);
      expect(seen.heads.map((h) => [h.status, h.framing, h.keepAlive])).toEqual([[status, framing, keepAlive]]);
      expect(seen.body).toBe(body);
      expect([seen.complete, seen.leftover]).toEqual([1, 0]);
    }
  });

  it('keeps raw header names and values as received', () => {
    const seen = parse('HTTP/1.1 200 OK\r\nX-Request-Id:  abc \r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\ncontent-length: 0\r\n\r\n');
    expect(seen.heads[0].rawHeaders).toEqual(['X-Request-Id', 'abc', 'set-cookie', 'a=1', 'Set-Cookie', 'b=2', 'content-length', '0']);
  });

  it('reports bytes after a complete response as left over', () => {
    expect(parse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiEXTRA').leftover).toBe(5);
  });

  it('delivers any chunking of any body unchanged (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { maxLength: 8 }),
        fc.array(fc.nat(400), { maxLength: 6 }),
        (chunks, cuts) => {
          const payload = Buffer.concat(chunks.map((c) => Buffer.from(c)));
          const framed = chunks.map((c) => `${c.length.toString(16)}\r\n${Buffer.from(c).toString('latin1')}\r\n`).join('');
          const wire = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${framed}0\r\n\r\n`;
          const seen = parse(wire, [...cuts].sort((a, b) => a - b));
          expect(Buffer.from(seen.body, 'latin1').equals(payload)).toBe(true);
          expect(seen.complete).toBe(1);
        },
      ),
    );
  });

  it.each([
    ['a status line that is not HTTP/1.x', 'HTTP/2 200\r\n\r\n'],
    ['obsolete line folding', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n  continued\r\nContent-Length: 0\r\n\r\n'],
    ['a header without a colon', 'HTTP/1.1 200 OK\r\nbroken\r\n\r\n'],
    ['a bad header name', 'HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n'],
    ['a bare line feed inside a header value', 'HTTP/1.1 200 OK\r\nX-A: one\ntwo\r\nContent-Length: 0\r\n\r\n'],
    ['a status code that is not three digits', 'HTTP/1.1 20 OK\r\n\r\n'],
    ['conflicting Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx'],
    ['a non-numeric Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'],
    ['a bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['chunk data without CRLF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiXX'],
    ['a protocol switch', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n'],
  ])('refuses %s', (_name, wire) => {
    expect(() => parse(wire)).toThrow(ResponseParseError);
  });

  it('refuses an endless head', () => {
    const parser = new Http1ResponseParser({ head: () => undefined, body: () => undefined, complete: () => undefined });
    parser.feed(Buffer.from('HTTP/1.1 200 OK\r\n'));
    expect(() => {
      for (let i = 0; i < 100; i++) parser.feed(Buffer.from(`X-Filler-${i}: ${'x'.repeat(1000)}\r\n`));
    }).toThrow(/larger than/);
  });

  it('knows a response cut short from one ended by the close', () => {
    const cut = new Http1ResponseParser({ head: () => undefined, body: () => undefined, complete: () => undefined });
    cut.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'));
    expect(() => cut.end()).toThrow(/closed in the middle/);
    const chunked = new Http1ResponseParser({ head: () => undefined, body: () => undefined, complete: () => undefined });
    chunked.feed(Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n'));
    expect(() => chunked.end()).toThrow(/closed in the middle/);
  });
});
