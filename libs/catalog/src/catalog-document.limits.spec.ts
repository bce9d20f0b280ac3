import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CATALOG_DOCUMENT_LIMITS, CatalogLimitError, checkDocumentLimits, scanDocumentDepth } from './catalog-document.limits';
import { parseCatalogDocument } from './catalog-document.parser';

const NO_STOP = { maxDepth: Number.MAX_SAFE_INTEGER, maxAliases: Number.MAX_SAFE_INTEGER };

/** Collections around the deepest value: a scalar is 0, `[]` is 1, `[[1]]` is 2. */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + children.reduce<number>((max, child) => Math.max(max, depthOf(child)), 0);
}

function limitError(text: string, format: 'yaml' | 'json' = 'yaml'): CatalogLimitError {
  try {
    parseCatalogDocument(text, format);
  } catch (e) {
    expect(e).toBeInstanceOf(CatalogLimitError);
    return e as CatalogLimitError;
  }
  throw new Error('expected a limit error');
}

/** A document `levels` deep in several shapes: flow and block YAML, compact sequences, JSON. */
function nested(levels: number): Record<string, [string, 'yaml' | 'json']> {
  // Indented shapes grow with the square of their depth: 1,000 levels is already 500 KB.
  const indented = Math.min(levels, 1_000);
  return {
    'flow YAML': [`models: ${'['.repeat(levels)}${']'.repeat(levels)}`, 'yaml'],
    'unclosed flow YAML': [`models: ${'['.repeat(levels)}`, 'yaml'],
    'flow mappings': [`${'{a: '.repeat(levels)}1${'}'.repeat(levels)}`, 'yaml'],
    'block sequences': [Array.from({ length: indented }, (_, i) => `${' '.repeat(i)}-`).join('\n'), 'yaml'],
    'block mappings': [Array.from({ length: indented }, (_, i) => `${' '.repeat(i)}a:`).join('\n'), 'yaml'],
    'compact sequences': [`models:\n${'- '.repeat(levels)}x\n`, 'yaml'],
    'JSON arrays': [`{"models":${'['.repeat(levels)}${']'.repeat(levels)}}`, 'json'],
    'JSON objects': [`{"models":[${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}]}`, 'json'],
  };
}

describe('catalog document limits', () => {
  it('never counts less than the real depth, for any value written as block YAML, flow YAML or JSON', () => {
    const value = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null)), tie('list'), tie('map')),
      list: fc.array(tie('node'), { maxLength: 4 }),
      map: fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), tie('node'), { maxKeys: 4 }),
    })).node;
    fc.assert(
      fc.property(value, (v) => {
        const real = depthOf(v);
        for (const text of [stringify(v), stringify(v, { collectionStyle: 'flow' }), JSON.stringify(v), JSON.stringify(v, null, 2), stringify(v, { indentSeq: false })]) {
          expect(scanDocumentDepth(text, NO_STOP).depth, JSON.stringify(text)).toBeGreaterThanOrEqual(real);
        }
      }),
      { seed: 1313, numRuns: 400 },
    );
  });

  it('does not count brackets in quotes, comments or block scalars', () => {
    const text = `# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
models:
  - name: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
    args: ['{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{']
    template: |
      [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
    profiles:
      - engine: llamacpp
`;
    expect(scanDocumentDepth(text, NO_STOP).depth).toBeLessThanOrEqual(8);
    expect(() => checkDocumentLimits(text)).not.toThrow();
  });

  it('lets a catalog nested as deep as the limit through, and parses it', () => {
    const levels = CATALOG_DOCUMENT_LIMITS.maxDepth - 2;
    const text = `models: ${'['.repeat(levels)}${']'.repeat(levels)}`;
    expect(depthOf(parseCatalogDocument(text))).toBe(levels + 1);
  });

  it.each(Object.entries(nested(20_000)))('refuses %s nested 20,000 (or 1,000) levels deep, naming maxDepth', (_shape, [text, format]) => {
    const error = limitError(text, format);
    expect(error.limit).toBe('maxDepth');
    expect(error.value).toBe(CATALOG_DOCUMENT_LIMITS.maxDepth);
    expect(error.problems).toEqual([{ path: '', message: `the document nests deeper than 32 levels; the limit (maxDepth) is 32` }]);
  });

  it('refuses a billion-laughs document, naming maxAliases', () => {
    const lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 9; i++) {
      const name = String.fromCharCode(97 + i);
      const previous = String.fromCharCode(96 + i);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${previous}`).join(',')}]`);
    }
    lines.push('models: *i');
    const error = limitError(lines.join('\n'));
    expect(error.limit).toBe('maxAliases');
    expect(error.message).toContain('the limit (maxAliases) is 100');
  });

  it('refuses more alias nodes than maxAliases before parsing', () => {
    const text = `x: &x 1\nmodels: [${Array(CATALOG_DOCUMENT_LIMITS.maxAliases + 1).fill('*x').join(', ')}]\n`;
    const error = limitError(text);
    expect(error.limit).toBe('maxAliases');
    expect(error.problems[0].message).toBe('the document uses more than 100 aliases; the limit (maxAliases) is 100');
    // Sixty are fine.
    expect(parseCatalogDocument(`x: &x 1\nmodels: [${Array(60).fill('*x').join(', ')}]\n`)).toMatchObject({ x: 1 });
  });

  it('refuses a document over maxBytes, counting UTF-8 bytes', () => {
    const { maxBytes } = CATALOG_DOCUMENT_LIMITS;
    const error = limitError(`# ${'x'.repeat(maxBytes)}\nmodels: []\n`);
    expect(error.limit).toBe('maxBytes');
    expect(error.problems[0].message).toBe(`the document is larger than ${maxBytes} bytes; the limit (maxBytes) is ${maxBytes}`);
    // Fewer characters than the limit, but more bytes: 'é' is two.
    expect(limitError(`# ${'é'.repeat(maxBytes / 2)}\nmodels: []\n`).limit).toBe('maxBytes');
  });
});
