/** What the proxy learns from a request body without building it: its top-level `model`, or why it is refused. */
export type BodyScan =
  | {
      readonly ok: true;
      /** The top-level `model` when it is a string (the last one, as JSON.parse keeps); undefined when absent or not a string. */
      readonly model: string | undefined;
    }
  | {
      readonly ok: false;
      /** `invalid_json`: not JSON; `too_deep`: nests past the limit; `not_object`: valid JSON but not an object. */
      readonly problem: 'invalid_json' | 'too_deep' | 'not_object';
      readonly message: string;
    };

const OBJECT = 1;
const ARRAY = 2;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const MINUS = 0x2d;
const DOT = 0x2e;

/** `"model"` as the bytes of an unescaped key. */
const MODEL_KEY = Buffer.from('model', 'latin1');

/** Escape letters allowed after a backslash, and hex digits, indexed by byte. */
const ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrtu') ESCAPE[c.charCodeAt(0)] = 1;
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

const isWs = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;

class Invalid extends Error {}

/**
 * Checks that `body` (UTF-8 bytes) is one JSON document nesting at most `maxDepth` objects and
 * arrays, and reads its top-level `model`, in one pass and without building the document: time
 * is linear in the size, memory is `maxDepth` bytes plus the decoded `model`. Accepts exactly
 * what `JSON.parse(body.toString('utf8'))` accepts within the depth limit (the property test
 * holds it to that); an over-deep body is refused at the first container past the limit, before
 * the rest is even looked at.
 */
export function scanRequestBody(body: Uint8Array, maxDepth: number): BodyScan {
  try {
    return scan(body, maxDepth);
  } catch (error) {
    if (error instanceof Invalid) return { ok: false, problem: 'invalid_json', message: error.message };
    throw error;
  }
}

function scan(b: Uint8Array, maxDepth: number): BodyScan {
  const n = b.length;
  const stack = new Uint8Array(maxDepth);
  let depth = 0;
  let i = 0;
  let model: string | undefined;
  /** The next value is the top-level `model`'s. */
  let capture = false;
  let topIsObject = false;

  const fail = (what: string): never => {
    throw new Invalid(i >= n ? `Unexpected end of JSON input ${what}` : `Unexpected byte 0x${b[i].toString(16).padStart(2, '0')} at position ${i} ${what}`);
  };
  const skipWs = (): void => {
    while (i < n && isWs(b[i])) i++;
  };
  /** Scans a string starting at its opening quote; returns whether it has escapes. `i` ends past the closing quote. */
  const skipString = (): boolean => {
    i++;
    let escaped = false;
    for (;;) {
      if (i >= n) fail('in a string');
      const c = b[i];
      if (c === QUOTE) {
        i++;
        return escaped;
      }
      if (c < 0x20) fail('(control character in a string)');
      if (c === BACKSLASH) {
        escaped = true;
        i++;
        if (i >= n || ESCAPE[b[i]] !== 1) fail('(bad escape in a string)');
        if (b[i] === 0x75) {
          for (let k = 1; k <= 4; k++) {
            i++;
            if (i >= n || HEX[b[i]] !== 1) fail('(bad \\u escape in a string)');
          }
        }
      }
      i++;
    }
  };
  const skipNumber = (): void => {
    if (b[i] === MINUS) i++;
    if (i < n && b[i] === 0x30) i++;
    else if (i < n && isDigit(b[i])) while (i < n && isDigit(b[i])) i++;
    else fail('in a number');
    if (i < n && b[i] === DOT) {
      i++;
      if (i >= n || !isDigit(b[i])) fail('in a number');
      while (i < n && isDigit(b[i])) i++;
    }
    if (i < n && (b[i] === 0x65 || b[i] === 0x45)) {
      i++;
      if (i < n && (b[i] === 0x2b || b[i] === MINUS)) i++;
      if (i >= n || !isDigit(b[i])) fail('in a number');
      while (i < n && isDigit(b[i])) i++;
    }
  };
  const skipLiteral = (word: string): void => {
    for (let k = 0; k < word.length; k++, i++) if (i >= n || b[i] !== word.charCodeAt(k)) fail('in a literal');
  };
  const decode = (start: number, end: number): string => JSON.parse(Buffer.from(b.buffer, b.byteOffset + start, end - start).toString('utf8')) as string;

  // Each turn reads one value; containers push and are closed in the loop below it.
  for (;;) {
    skipWs();
    if (i >= n) fail('(expected a value)');
    const c = b[i];
    const capturing = capture;
    capture = false;
    let opened = false;
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (depth === maxDepth) {
        return { ok: false, problem: 'too_deep', message: `Request body nests JSON deeper than the limit of ${maxDepth} levels.` };
      }
      if (depth === 0) topIsObject = c === OPEN_BRACE;
      if (capturing) model = undefined;
      stack[depth++] = c === OPEN_BRACE ? OBJECT : ARRAY;
      i++;
      skipWs();
      const close = c === OPEN_BRACE ? CLOSE_BRACE : CLOSE_BRACKET;
      if (i < n && b[i] === close) {
        i++;
        depth--;
      } else opened = true;
    } else if (c === QUOTE) {
      const start = i;
      const escaped = skipString();
      if (capturing) model = escaped ? decode(start, i) : Buffer.from(b.buffer, b.byteOffset + start + 1, i - start - 2).toString('utf8');
    } else {
      if (c === MINUS || isDigit(c)) skipNumber();
      else if (c === 0x74) skipLiteral('true');
      else if (c === 0x66) skipLiteral('false');
      else if (c === 0x6e) skipLiteral('null');
      else fail('(expected a value)');
      if (capturing) model = undefined;
    }
    // After a value (or an opened container): find what comes next, closing containers as they end.
    for (;;) {
      if (opened) {
        opened = false;
        if (stack[depth - 1] === ARRAY) break; // the first element follows
        capture = readKey();
        break;
      }
      if (depth === 0) {
        skipWs();
        if (i < n) fail('after the JSON document');
        if (!topIsObject) return { ok: false, problem: 'not_object', message: 'Request body must be a JSON object.' };
        return { ok: true, model };
      }
      skipWs();
      if (i >= n) fail('(unterminated object or array)');
      const next = b[i];
      if (next === COMMA) {
        i++;
        if (stack[depth - 1] === OBJECT) capture = readKey();
        break;
      }
      if (next === (stack[depth - 1] === OBJECT ? CLOSE_BRACE : CLOSE_BRACKET)) {
        i++;
        depth--;
        continue;
      }
      fail(stack[depth - 1] === OBJECT ? "(expected ',' or '}')" : "(expected ',' or ']')");
    }
  }

  /** Reads `"key" :` in an object; true when it is a top-level `model`. */
  function readKey(): boolean {
    skipWs();
    if (i >= n || b[i] !== QUOTE) fail('(expected a property name)');
    const start = i;
    const escaped = skipString();
    let isModel = false;
    if (depth === 1) {
      if (escaped) isModel = decode(start, i) === 'model';
      else isModel = i - start - 2 === MODEL_KEY.length && MODEL_KEY.equals(b.subarray(start + 1, i - 1));
    }
    skipWs();
    if (i >= n || b[i] !== COLON) fail("(expected ':')");
    i++;
    return isModel;
  }
}
