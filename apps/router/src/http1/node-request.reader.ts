import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiHandler, ApiRequest, BodyLimits } from './api-exchange';

const EMPTY = Buffer.alloc(0);
/** Stream errors end in 'close'; the listener only keeps them from being thrown. */
const ignore = (): void => undefined;

/**
 * Serves a request Node's HTTP server parsed (what the fast front end hands over: HTTP/1.0,
 * chunked uploads, anything unusual) with the same request shape as the fast front end: the
 * body is read once, bounded, and the handler gets it whole. A body declared or arriving over
 * the limit, or one `readBody` refuses, is not kept: the handler gets the request at once with
 * an empty body (and `bodyTooLarge` for the former) and refuses it.
 */
export function serveNodeRequest(req: IncomingMessage, res: ServerResponse, limits: BodyLimits, handler: ApiHandler): void {
  const headers = req.headers as Record<string, string | undefined>;
  const declared = headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBodyBytes) {
    handler(nodeRequest(req, EMPTY, true), res);
    return;
  }
  if (limits.readBody !== undefined && !limits.readBody({ headers })) {
    handler(nodeRequest(req, EMPTY, false), res);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  req.on('data', (chunk: Buffer) => {
    if (tooLarge) return;
    size += chunk.length;
    if (size > limits.maxBodyBytes) {
      tooLarge = true;
      chunks.length = 0;
      handler(nodeRequest(req, EMPTY, true), res);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (tooLarge || res.writableEnded || res.destroyed) return;
    handler(nodeRequest(req, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size), false), res);
  });
  req.on('error', ignore);
}

function nodeRequest(req: IncomingMessage, body: Buffer, bodyTooLarge: boolean): ApiRequest {
  return { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers as Record<string, string | undefined>, rawHeaders: req.rawHeaders, body, bodyTooLarge };
}
