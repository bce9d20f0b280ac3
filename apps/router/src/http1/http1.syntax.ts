/** Characters allowed in a header field name (RFC 9110 token), indexed by char code. */
export const TOKEN = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") TOKEN[c.charCodeAt(0)] = 1;

/** True for the char code of an ASCII digit. */
export const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;

/** The blank line that ends a message head. */
export const CRLF_CRLF = Buffer.from('\r\n\r\n');

/** Characters a header value must never carry (they would split or end the message). */
export const CR_LF_NUL = /[\r\n\0]/;

/** Bodies up to this size are copied between their latin1 head and tail into one buffer (one write); larger ones go beside them. */
const JOIN_LIMIT = 16 * 1024;

/** `head`, `body` and `tail` as buffers to write in order: one when the body is small, else up to three (written corked). */
export function joinForWrite(head: string, body: Buffer, tail = ''): Buffer[] {
  if (body.length > JOIN_LIMIT) {
    const parts = head === '' ? [body] : [Buffer.from(head, 'latin1'), body];
    if (tail !== '') parts.push(Buffer.from(tail, 'latin1'));
    return parts;
  }
  const out = Buffer.allocUnsafe(head.length + body.length + tail.length);
  out.write(head, 0, 'latin1');
  body.copy(out, head.length);
  out.write(tail, head.length + body.length, 'latin1');
  return [out];
}
