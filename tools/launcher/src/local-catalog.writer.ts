// The catalog `npm start` serves: the template in deploy/local with the data directory filled in,
// validated, written where the controller reads it.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Catalog, CatalogError, parseCatalogDocument } from '@llmgw/catalog';
import { stringify } from 'yaml';

/** Placeholders a catalog template may use in any string value, and what they become. */
export interface CatalogTemplateValues {
  /** Absolute data directory (`${LLMGW_DATA_DIR}`). */
  readonly LLMGW_DATA_DIR: string;
}

/** A rendered catalog: its YAML text and the validated Catalog it parses to. */
export interface RenderedCatalog {
  readonly yaml: string;
  readonly catalog: Catalog;
}

const PLACEHOLDER = /\$\{([A-Z][A-Z0-9_]*)\}/g;

/**
 * Replaces `${NAME}` in every string value of the template (keys and comments untouched) and
 * validates the result with the same constructor the controller uses. An unknown placeholder or
 * an invalid catalog throws an Error naming `templateName` and every problem; the value is
 * re-serialised, so a path with spaces or quotes stays one YAML string.
 */
export function renderCatalog(templateText: string, values: CatalogTemplateValues, templateName: string): RenderedCatalog {
  if (/\s/.test(values.LLMGW_DATA_DIR)) {
    throw new Error(
      `the data directory ${JSON.stringify(values.LLMGW_DATA_DIR)} contains whitespace, which a file:// source cannot hold: set LLMGW_DATA_DIR to a path without spaces`,
    );
  }
  let doc: unknown;
  try {
    doc = parseCatalogDocument(templateText);
  } catch (error) {
    throw new Error(`${templateName}: ${describeCatalogError(error)}`);
  }
  const unknown = new Set<string>();
  const filled = mapStrings(doc, (s) =>
    s.replace(PLACEHOLDER, (whole, name: string) => {
      if (Object.prototype.hasOwnProperty.call(values, name)) return values[name as keyof CatalogTemplateValues];
      unknown.add(name);
      return whole;
    }),
  );
  if (unknown.size > 0) throw new Error(`${templateName}: unknown placeholder ${[...unknown].map((n) => `\${${n}}`).join(', ')} (known: \${LLMGW_DATA_DIR})`);
  let catalog: Catalog;
  try {
    catalog = Catalog.create(filled);
  } catch (error) {
    throw new Error(`${templateName}: ${describeCatalogError(error)}`);
  }
  if (catalog.models.length === 0) throw new Error(`${templateName}: the catalog has no models, so there is nothing to serve`);
  const header = `# Written by the launcher from ${templateName}; edits here are replaced on the next start.\n`;
  return { yaml: header + stringify(filled, { lineWidth: 0 }), catalog };
}

/** Reads the template, renders it and writes the result to `outFile` atomically. */
export function writeLocalCatalog(templateFile: string, outFile: string, values: CatalogTemplateValues): RenderedCatalog {
  let text: string;
  try {
    text = readFileSync(templateFile, 'utf8');
  } catch (error) {
    throw new Error(`cannot read the catalog ${templateFile}: ${(error as Error).message}`);
  }
  const rendered = renderCatalog(text, values, templateFile);
  mkdirSync(dirname(outFile), { recursive: true });
  const tmp = `${outFile}.partial-${process.pid}`;
  writeFileSync(tmp, rendered.yaml);
  renameSync(tmp, outFile);
  return rendered;
}

function mapStrings(value: unknown, fn: (s: string) => string): unknown {
  if (typeof value === 'string') return fn(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, fn));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, mapStrings(v, fn)]));
  }
  return value;
}

/** A CatalogError's message is already a summary plus one `path: message` line per problem. */
function describeCatalogError(error: unknown): string {
  return error instanceof CatalogError || error instanceof Error ? error.message : String(error);
}
