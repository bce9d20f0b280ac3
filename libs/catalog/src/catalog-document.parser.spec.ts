import { describe, expect, it } from 'vitest';
import { CatalogError } from './catalog.error';
import { loadCatalog, parseCatalogDocument } from './catalog-document.parser';

function parseError(text: string, format?: 'yaml' | 'json'): CatalogError {
  try {
    parseCatalogDocument(text, format);
  } catch (e) {
    expect(e).toBeInstanceOf(CatalogError);
    return e as CatalogError;
  }
  throw new Error('expected a parse error');
}

describe('parseCatalogDocument', () => {
  it('reads YAML 1.2 (core schema): yes and no stay strings', () => {
    expect(parseCatalogDocument('a: yes\nb: no\nc: 010\n')).toEqual({ a: 'yes', b: 'no', c: 10 });
  });

  it('reads JSON', () => {
    expect(parseCatalogDocument('{"models": [{"name": "m", "size": 1}]}', 'json')).toEqual({ models: [{ name: 'm', size: 1 }] });
  });

  it.each([
    ['an unclosed flow sequence', 'models: [\n  {name: a\n', 'yaml', 'line 3, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]'],
    ['a duplicate key', 'models: []\nmodels: []\n', 'yaml', 'line 2, column 1: Map keys must be unique'],
    ['several documents', 'models: []\n---\nmodels: []\n', 'yaml', 'line 2, column 1'],
    ['a tab indent', 'models:\n\t- name: a\n', 'yaml', 'line 2, column 1'],
    ['broken JSON', '{"models": [}', 'json', 'line 1, column 13'],
  ] as const)('names the line and column of %s', (_n, text, format, where) => {
    const e = parseError(text, format);
    expect(e.message.split('\n')[0]).toMatch(/^cannot parse catalog (YAML|JSON): \d+ errors?$/);
    expect(e.message).toContain(where);
    expect(e.problems.length).toBeGreaterThan(0);
  });

  it('refuses alias bombs with a CatalogError naming the limit', () => {
    const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 8; i++) {
      const prev = String.fromCharCode(97 + i);
      const name = String.fromCharCode(98 + i);
      lines.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(', ')}]`);
    }
    const e = parseError(lines.join('\n'));
    expect(e.message).toContain('the limit (maxAliases) is 100');
  });
});

describe('loadCatalog', () => {
  it('parses and validates in one step', () => {
    const c = loadCatalog('models:\n  - {name: m, source: "https://h/m.gguf", size: 1MB, replicas: 1, profiles: [{engine: llamacpp}]}\n');
    expect(c.get('m')?.sizeBytes).toBe(1_000_000);
  });
  it('reports validation problems with their paths', () => {
    expect(() => loadCatalog('models:\n  - {name: m, source: "https://h/m.gguf", size: 1MB, replicas: 1, profiles: [{engine: vllm}]}\n')).toThrow(
      'models[0].profiles[0].gpuClass: required for engine vllm',
    );
  });
});
