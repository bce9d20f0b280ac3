// Properties of the HTTP/1.1 request head reader (fast-check), below the socket: a valid request
// read in any byte split gives the same head and body as read whole; any bytes at all, in any
// split, give a result (a head, more bytes needed, or a hand-over to Node) and never throw.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scanRequestHead, type HeadScan } from './http1-request.parser';

/** Feeds `wire` to the reader cut at `cuts`, as the front end does: bytes so far, and how far the last scan looked. */
function readSplit(wire: Buffer, cuts: readonly number[]): HeadScan {
  const points = [...new Set(cuts.map((c) => (wire.length === 0 ? 0 : c % wire.length)))].filter((p) => p > 0).sort((a, b) => a - b);
  let checked = 0;
  let scan: HeadScan = { state: 'partial', checked: 0 };
  for (const p of [...points, wire.length]) {
    scan = scanRequestHead(wire.subarray(0, p), checked);
    if (scan.state !== 'partial') return scan;
    checked = scan.checked;
  }
  return scan;
}

const token = fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/).filter((n) => !['content-length', 'transfer-encoding', 'expect', 'upgrade', 'connection', 'host'].includes(n.toLowerCase()));
const value = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e\t]{0,30}[\x21-\x7e])?$/);

const validRequest = fc.record({
  method: fc.constantFrom('GET', 'POST'),
  path: fc.constantFrom('/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/models', '/v1/models/m%2Fx', '/v1/chat/completions?x=1'),
  headers: fc.array(fc.tuple(token, value), { maxLength: 6 }),
  body: fc.uint8Array({ maxLength: 200 }),
  close: fc.boolean(),
});

function wireOf(r: { method: string; path: string; headers: [string, string][]; body: Uint8Array; close: boolean }): Buffer {
  const lines = [`${r.method} ${r.path} HTTP/1.1`, 'Host: router', ...r.headers.map(([n, v]) => `${n}: ${v}`), `Content-Length: ${r.body.length}`];
  if (r.close) lines.push('Connection: close');
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), r.body]);
}

describe('the request head reader under any byte split', () => {
  it('reads a valid request split anywhere as it reads it whole: same head, same body', () => {
    fc.assert(
      fc.property(validRequest, fc.array(fc.nat(), { maxLength: 12 }), (r, cuts) => {
        const wire = wireOf(r);
        const whole = scanRequestHead(wire, 0);
        expect(whole.state).toBe('head');
        if (whole.state !== 'head') return;
        expect(whole.head).toMatchObject({ method: r.method, url: r.path, contentLength: r.body.length, keepAlive: !r.close });
        expect(wire.subarray(whole.bodyStart, whole.bodyStart + whole.head.contentLength)).toEqual(Buffer.from(r.body));
        expect(readSplit(wire, cuts)).toEqual(whole);
      }),
      { numRuns: 1_000 },
    );
  });

  it('answers any bytes, in any split, with the same result as whole, and never throws', () => {
    const piece = fc.oneof(
      fc.uint8Array({ maxLength: 24 }),
      fc.constantFrom('POST /v1/chat/completions HTTP/1.1\r\n', 'GET /v1/models HTTP/1.1\r\n', 'GET / HTTP/1.0\r\n', 'Host: x\r\n', 'Content-Length: 3\r\n', 'Content-Length: 99999999999999999999\r\n', 'Transfer-Encoding: chunked\r\n', ' folded\r\n', '\r\n', '\r', '\n', ':', '\x00', '\x7f', '\xff').map((t) => Buffer.from(t, 'latin1')),
    );
    // Mostly behind a servable request line, so the bytes after it are judged too; sometimes a byte at a time.
    const start = fc.constantFrom('', 'POST /v1/chat/completions HTTP/1.1\r\n', 'GET /v1/models HTTP/1.1\r\nHost: x\r\n', 'PO');
    const cutsOrEveryByte = fc.oneof(fc.array(fc.nat(), { maxLength: 12 }), fc.constant(Array.from({ length: 512 }, (_, i) => i)));
    fc.assert(
      fc.property(start, fc.array(piece, { maxLength: 10 }), cutsOrEveryByte, (first, pieces, cuts) => {
        const wire = Buffer.concat([Buffer.from(first, 'latin1'), ...pieces]);
        const whole = scanRequestHead(wire, 0);
        expect(['partial', 'head', 'handover']).toContain(whole.state);
        const split = readSplit(wire, cuts);
        expect(split.state).toBe(whole.state);
        if (whole.state === 'head') expect(split).toEqual(whole);
      }),
      { numRuns: 3_000 },
    );
  });
});
