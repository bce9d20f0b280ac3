import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scanRequestBody, type BodyScan } from './request-body.scanner';

/** What the proxy read from a body before the scanner: JSON.parse, then the top-level `model` if a string. */
function viaJsonParse(text: string): 'invalid_json' | 'not_object' | { model: string | undefined } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return 'invalid_json';
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'not_object';
  const model = (parsed as { model?: unknown }).model;
  return { model: typeof model === 'string' ? model : undefined };
}

function outcome(scan: BodyScan): 'invalid_json' | 'not_object' | 'too_deep' | { model: string | undefined } {
  return scan.ok ? { model: scan.model } : scan.problem;
}

const scanText = (text: string, maxDepth = 64): BodyScan => scanRequestBody(Buffer.from(text, 'utf8'), maxDepth);

/** Whitespace JSON allows between tokens, so layouts other than JSON.stringify's are tried too. */
const ws = fc.constantFrom('', ' ', '\n', '\r\n\t', '  ');

/** JSON text of `value` with random whitespace around every structural character. */
const spaced = (value: unknown, pad: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.array(pad, { minLength: 64, maxLength: 64 }).map((pads) => {
    let k = 0;
    return JSON.stringify(value).replace(/[{}[\],:]/g, (m) => `${pads[k++ % pads.length]}${m}${pads[k++ % pads.length]}`);
  });

describe('scanRequestBody', () => {
  it('agrees with JSON.parse on every valid JSON document (objects with and without a model, any value)', () => {
    const body = fc.oneof(
      fc.jsonValue({ maxDepth: 6 }),
      fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 })),
      fc.record({ model: fc.oneof(fc.string({ unit: 'binary' }), fc.jsonValue({ maxDepth: 3 })), messages: fc.jsonValue({ maxDepth: 4 }) }),
      fc.record({ stream: fc.boolean(), nested: fc.record({ model: fc.string() }) }),
    );
    fc.assert(
      fc.property(body, (value) => {
        const text = JSON.stringify(value);
        expect(outcome(scanText(text))).toEqual(viaJsonParse(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('agrees with JSON.parse whatever the whitespace between tokens (strings with blanks excluded from the padding)', () => {
    fc.assert(
      fc.property(
        fc.record({ model: fc.string(), max_tokens: fc.integer(), stream: fc.boolean(), x: fc.array(fc.double({ noNaN: true, noDefaultInfinity: true })) }).chain((v) => spaced(v, ws)),
        (text) => {
          expect(outcome(scanText(text))).toEqual(viaJsonParse(text));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('accepts exactly what JSON.parse accepts when a valid document is damaged (a character dropped, inserted or replaced)', () => {
    const alphabet = fc.constantFrom(...'{}[]",:\\ 0123456789-+.eEtrufalsn\x01\n'.split(''));
    fc.assert(
      fc.property(
        fc.record({ model: fc.string(), n: fc.double({ noNaN: true, noDefaultInfinity: true }), list: fc.array(fc.oneof(fc.boolean(), fc.constant(null), fc.string())) }),
        fc.nat(),
        fc.constantFrom('drop', 'insert', 'replace'),
        alphabet,
        (value, where, how, ch) => {
          const text = JSON.stringify(value);
          const at = where % (text.length + 1);
          const damaged = how === 'drop' ? text.slice(0, at) + text.slice(at + 1) : how === 'insert' ? text.slice(0, at) + ch + text.slice(at) : text.slice(0, at) + ch + text.slice(at + 1);
          expect(outcome(scanText(damaged))).toEqual(viaJsonParse(damaged));
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it.each([
    ['the last of repeated model keys', '{"model":"a","model":"b"}', { model: 'b' }],
    ['a model key written with escapes', '{"mod\\u0065l":"x\\ny\\u00e9"}', { model: 'x\nyé' }],
    ['a model that is not a string', '{"model":{"model":"inner"}}', { model: undefined }],
    ['a nested model only', '{"a":{"model":"inner"}}', { model: undefined }],
    ['multi-byte UTF-8 in the model', '{"model":"модель-🙂"}', { model: 'модель-🙂' }],
    ['an array', '[{"model":"m"}]', 'not_object'],
    ['a string', '"model"', 'not_object'],
    ['trailing data', '{"model":"m"} x', 'invalid_json'],
    ['a trailing comma', '{"model":"m",}', 'invalid_json'],
    ['a byte order mark', '\ufeff{"model":"m"}', 'invalid_json'],
    ['an empty body', '', 'invalid_json'],
    ['a leading zero', '{"n":01}', 'invalid_json'],
  ])('reads %s like JSON.parse', (_what, text, expected) => {
    expect(outcome(scanText(text))).toEqual(expected);
    expect(viaJsonParse(text)).toEqual(expected);
  });

  it('counts depth as nested objects and arrays: exactly the limit passes, one more is refused naming the limit', () => {
    for (const limit of [1, 2, 5, 64]) {
      const deep = (levels: number): string => `{"model":"m","x":${'['.repeat(levels - 1)}0${']'.repeat(levels - 1)}}`;
      expect(scanText(deep(limit), limit)).toEqual({ ok: true, model: 'm' });
      expect(scanText(deep(limit + 1), limit)).toEqual({ ok: false, problem: 'too_deep', message: `Request body nests JSON deeper than the limit of ${limit} levels.` });
    }
  });

  it('refuses a 16 MB nested body at the first level past the limit, without reading the rest', () => {
    const half = 8 * 1024 * 1024;
    const body = Buffer.alloc(2 * half);
    body.fill('[', 0, half);
    body.fill(']', half);
    // Damage past the limit is never reached: the refusal is about depth, not syntax.
    body[1_000] = 0x78;
    const scan = scanRequestBody(body, 64);
    expect(scan).toEqual({ ok: false, problem: 'too_deep', message: 'Request body nests JSON deeper than the limit of 64 levels.' });
  });

  it('reads the model of a large flat body that JSON.parse would also accept', () => {
    const text = JSON.stringify({ messages: Array.from({ length: 20_000 }, (_, k) => ({ role: 'user', content: `m${k} "q" \\ é` })), model: 'big' });
    expect(scanText(text)).toEqual({ ok: true, model: 'big' });
  });
});
