import { parseDocument } from 'yaml';
import { Catalog } from './catalog';
import { CatalogError } from './catalog.error';
import { CATALOG_DOCUMENT_LIMITS, CatalogLimitError, checkDocumentLimits } from './catalog-document.limits';

/** Document formats a catalog may be written in; YAML is the default and also reads JSON. */
export type CatalogFormat = 'yaml' | 'json';

/**
 * Parses catalog text into a plain value for `Catalog.create`. YAML 1.2 (core schema: `yes` stays
 * a string) by default; `json` uses the strict JSON schema. Duplicate keys, several documents or
 * a syntax error throw a `CatalogError` naming the line and column. A document over one of
 * `CATALOG_DOCUMENT_LIMITS` (size, depth, aliases) throws a `CatalogLimitError` naming it, before
 * any tree is built.
 */
export function parseCatalogDocument(text: string, format: CatalogFormat = 'yaml'): unknown {
  checkDocumentLimits(text);
  const doc = parseDocument(text, {
    schema: format === 'json' ? 'json' : 'core',
    uniqueKeys: true,
    prettyErrors: true,
  });
  if (doc.errors.length > 0) {
    const problems = doc.errors.map((e) => {
      const pos = e.linePos?.[0];
      const where = pos ? `line ${pos.line}, column ${pos.col}` : 'document';
      return { path: '', message: `${where}: ${firstLine(e.message)}` };
    });
    throw new CatalogError(problems, `cannot parse catalog ${format.toUpperCase()}: ${problems.length} error${problems.length === 1 ? '' : 's'}`);
  }
  const { maxAliases } = CATALOG_DOCUMENT_LIMITS;
  try {
    return doc.toJS({ maxAliasCount: maxAliases });
  } catch (e) {
    // An alias bomb (or an alias to nothing) fails only when the document is expanded.
    if (/excessive alias count/i.test((e as Error).message)) {
      throw new CatalogLimitError('maxAliases', maxAliases, `the document's aliases expand to more than ${maxAliases} copies`);
    }
    throw new CatalogError([{ path: '', message: firstLine((e as Error).message) }], `cannot parse catalog ${format.toUpperCase()}: 1 error`);
  }
}

/** `Catalog.create(parseCatalogDocument(text, format))`. */
export function loadCatalog(text: string, format?: CatalogFormat): Catalog {
  return Catalog.create(parseCatalogDocument(text, format));
}

function firstLine(message: string): string {
  return message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
}
