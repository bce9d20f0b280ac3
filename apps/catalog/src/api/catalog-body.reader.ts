import type { IncomingMessage } from 'node:http';
import { CatalogError, CatalogLimitError, parseCatalogDocument, type CatalogFormat } from '@llmgw/catalog';
import { ProblemError } from '@llmgw/observability';

/** Media types a catalog document may be sent as, and the parser each one gets. */
const MEDIA_TYPES: Readonly<Record<string, CatalogFormat>> = {
  'application/json': 'json',
  'application/yaml': 'yaml',
  'application/x-yaml': 'yaml',
  'text/yaml': 'yaml',
  'text/x-yaml': 'yaml',
};

/** The media types accepted, for error messages and the OpenAPI document. */
export const ACCEPTED_MEDIA_TYPES = Object.keys(MEDIA_TYPES);

/**
 * Which parser a Content-Type asks for: JSON for `application/json` and any `+json` type, YAML
 * for the YAML types. Only UTF-8 (or no charset) is accepted. Throws a 415 problem otherwise.
 */
export function formatOf(contentType: string | undefined): CatalogFormat {
  if (contentType === undefined || contentType.trim() === '') {
    throw new ProblemError('unsupported-media-type', `Content-Type is required: one of ${ACCEPTED_MEDIA_TYPES.join(', ')}`);
  }
  const [essence, ...params] = contentType.split(';').map((part) => part.trim());
  const type = essence.toLowerCase();
  for (const param of params) {
    const [key, value = ''] = param.split('=').map((s) => s.trim());
    if (key.toLowerCase() === 'charset' && !/^"?utf-8"?$/i.test(value)) {
      throw new ProblemError('unsupported-media-type', `charset ${JSON.stringify(value)} is not supported: send UTF-8`);
    }
  }
  const format = MEDIA_TYPES[type] ?? (/^application\/[a-z0-9.+-]+\+json$/.test(type) ? 'json' : undefined);
  if (format === undefined) {
    throw new ProblemError(
      'unsupported-media-type',
      `Content-Type ${JSON.stringify(essence)} is not accepted: send one of ${ACCEPTED_MEDIA_TYPES.join(', ')}`,
    );
  }
  return format;
}

/**
 * Reads the whole request body, at most `limitBytes`. A declared Content-Length over the limit
 * is refused before reading; a body that grows past it while streaming is refused as soon as it
 * does. Refused bodies are drained and discarded, never buffered, so a client still sending can
 * finish and read the 413 (the server's request timeout bounds a client that never stops).
 * Bytes must be valid UTF-8 (400 otherwise).
 */
export async function readBodyText(req: IncomingMessage, limitBytes: number): Promise<string> {
  const declared = req.headers['content-length'];
  const tooLarge = (what: string): ProblemError =>
    new ProblemError('body-too-large', `${what}; the limit is ${limitBytes} bytes`);
  if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > limitBytes) {
    req.resume();
    throw tooLarge(`request body is ${declared} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    let refused = false;
    const onData = (chunk: Buffer): void => {
      if (refused) return;
      size += chunk.length;
      if (size > limitBytes) {
        refused = true;
        chunks.length = 0;
        reject(tooLarge(`request body is larger than ${limitBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve());
    req.once('error', (error) => reject(new ProblemError('bad-request', `cannot read request body: ${error.message}`)));
    req.once('aborted', () => reject(new ProblemError('bad-request', 'request body aborted by the client')));
  });
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, size));
  } catch {
    throw new ProblemError('unparseable-body', 'request body is not valid UTF-8');
  }
}

/**
 * Reads and parses a catalog document (or one model) from the request: media type from
 * Content-Type, size bounded, syntax checked by the catalog library's one parser. Returns a
 * plain value for `Catalog.create`; throws a problem (400/413/415/422) naming every syntax error
 * or the document limit crossed.
 */
export async function readCatalogBody(req: IncomingMessage, limitBytes: number): Promise<unknown> {
  const format = formatOf(req.headers['content-type']);
  const text = await readBodyText(req, limitBytes);
  return parseDocumentText(text, format);
}

/**
 * Parses body text with the catalog library's parser; a syntax error becomes a 400 problem listing
 * every error. A document over one of the library's limits is refused before it is parsed: 413
 * for its size, 422 for its depth or aliases, naming the limit and its value.
 */
export function parseDocumentText(text: string, format: CatalogFormat): unknown {
  try {
    return parseCatalogDocument(text, format);
  } catch (error) {
    if (error instanceof CatalogLimitError) {
      const kind = error.limit === 'maxBytes' ? 'body-too-large' : 'document-too-complex';
      throw new ProblemError(kind, error.message.split('\n')[0], error.problems, { limit: { name: error.limit, value: error.value } });
    }
    if (error instanceof CatalogError) {
      throw new ProblemError('unparseable-body', error.message.split('\n')[0], error.problems);
    }
    // The YAML library may still throw plain errors for input the limits let through.
    throw new ProblemError('unparseable-body', `cannot parse request body as ${format.toUpperCase()}: ${(error as Error).message}`);
  }
}
