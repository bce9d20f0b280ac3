import { STATUS_CODES } from 'node:http';

/** Every way the router itself refuses or fails a request. Each maps to exactly one status. */
export type RouterErrorKind =
  | 'unauthorized'
  | 'unknown_route'
  | 'method_not_allowed'
  | 'invalid_json'
  | 'json_too_deep'
  | 'invalid_request'
  | 'bad_http_request'
  | 'headers_too_large'
  | 'expectation_failed'
  | 'request_timeout'
  | 'model_not_found'
  | 'endpoint_not_served'
  | 'body_too_large'
  | 'rate_limit_exceeded'
  | 'insufficient_quota'
  | 'queue_full'
  | 'queue_timeout'
  | 'no_endpoints'
  | 'upstream_unavailable'
  | 'upstream_timeout'
  | 'stream_interrupted'
  | 'internal';

/** The OpenAI error body: `{"error":{"message","type","param","code"}}`. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** HTTP status, OpenAI `type` and `code` of one error kind. */
export interface ErrorShape {
  readonly status: number;
  readonly type: string;
  readonly code: string;
}

/**
 * The one mapping from router error kind to HTTP status and OpenAI `type`/`code`. Exhaustive:
 * adding a kind without a case fails to compile.
 */
export function errorShape(kind: RouterErrorKind): ErrorShape {
  switch (kind) {
    case 'unauthorized':
      return { status: 401, type: 'invalid_request_error', code: 'invalid_api_key' };
    case 'unknown_route':
      return { status: 404, type: 'invalid_request_error', code: 'unknown_url' };
    case 'method_not_allowed':
      return { status: 405, type: 'invalid_request_error', code: 'method_not_allowed' };
    case 'invalid_json':
      return { status: 400, type: 'invalid_request_error', code: 'invalid_json' };
    case 'json_too_deep':
      return { status: 400, type: 'invalid_request_error', code: 'json_too_deep' };
    case 'invalid_request':
      return { status: 400, type: 'invalid_request_error', code: 'invalid_request' };
    case 'bad_http_request':
      return { status: 400, type: 'invalid_request_error', code: 'bad_request' };
    case 'headers_too_large':
      return { status: 431, type: 'invalid_request_error', code: 'request_header_fields_too_large' };
    case 'expectation_failed':
      return { status: 417, type: 'invalid_request_error', code: 'expectation_failed' };
    case 'request_timeout':
      return { status: 408, type: 'invalid_request_error', code: 'request_timeout' };
    case 'model_not_found':
      return { status: 404, type: 'invalid_request_error', code: 'model_not_found' };
    case 'endpoint_not_served':
      return { status: 400, type: 'invalid_request_error', code: 'unsupported_endpoint' };
    case 'body_too_large':
      return { status: 413, type: 'invalid_request_error', code: 'request_too_large' };
    case 'rate_limit_exceeded':
      return { status: 429, type: 'requests', code: 'rate_limit_exceeded' };
    case 'insufficient_quota':
      return { status: 429, type: 'insufficient_quota', code: 'insufficient_quota' };
    case 'queue_full':
      return { status: 429, type: 'rate_limit_error', code: 'queue_full' };
    case 'queue_timeout':
      return { status: 429, type: 'rate_limit_error', code: 'queue_timeout' };
    case 'no_endpoints':
      return { status: 503, type: 'server_error', code: 'no_endpoints' };
    case 'upstream_unavailable':
      return { status: 502, type: 'server_error', code: 'upstream_unavailable' };
    case 'upstream_timeout':
      return { status: 504, type: 'server_error', code: 'upstream_timeout' };
    case 'stream_interrupted':
      return { status: 502, type: 'server_error', code: 'stream_interrupted' };
    case 'internal':
      return { status: 500, type: 'server_error', code: 'internal_error' };
    default: {
      const unreachable: never = kind;
      throw new Error(`unmapped router error kind ${String(unreachable)}`);
    }
  }
}

/** The OpenAI-shaped body for `kind` with `message` (and the offending request field, if any). */
export function errorBody(kind: RouterErrorKind, message: string, param: string | null = null): OpenAiErrorBody {
  const shape = errorShape(kind);
  return { error: { message, type: shape.type, param, code: shape.code } };
}

/** What sendError writes to: any HTTP response with a head and a body (Node's ServerResponse, the router's own). */
export interface ErrorResponse {
  readonly headersSent: boolean;
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  end(chunk: string): unknown;
}

/** Extra response headers an error may carry (`Retry-After`, `WWW-Authenticate`, `Allow`, `Connection`). */
export type ErrorHeaders = Readonly<Record<string, string | number>>;

/**
 * Writes `kind` as a complete JSON response. Returns the status written. Does nothing (and
 * returns the status) when headers are already out — a started response is ended by the
 * stream-error path instead.
 */
export function sendError(
  res: ErrorResponse,
  kind: RouterErrorKind,
  message: string,
  param: string | null = null,
  headers: ErrorHeaders = {},
): number {
  const shape = errorShape(kind);
  if (res.headersSent) return shape.status;
  const text = JSON.stringify(errorBody(kind, message, param));
  res.writeHead(shape.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
  return shape.status;
}

/** One SSE event carrying an OpenAI-shaped error, as the last thing written on a cut stream. */
export function sseErrorEvent(kind: RouterErrorKind, message: string): string {
  return `data: ${JSON.stringify(errorBody(kind, message))}\n\n`;
}

/** Most of an engine's error body read to normalise it (bytes); the rest is dropped unread. */
export const ENGINE_ERROR_BODY_LIMIT = 64 * 1024;
/** Longest message kept from an engine's error body (characters). */
const ENGINE_MESSAGE_LIMIT = 4096;

/**
 * The OpenAI-shaped body for an engine's non-2xx answer (`status`, the first bytes of its body).
 * Keeps the engine's message, and its `type` and `param` when they are strings; `code` is kept
 * only when it is a string (llama.cpp and vLLM put the HTTP status there as a number, which
 * OpenAI clients do not expect), else null. Understands `{"error":{...}}` (llama.cpp, newer
 * vLLM, OpenAI), a top-level `{"message",...}` (older vLLM), `{"error":"..."}` and
 * `{"detail":...}` (FastAPI); anything else becomes the message as text. Never throws.
 */
export function engineErrorBody(status: number, raw: Buffer): OpenAiErrorBody {
  const text = raw.toString('utf8').trim();
  let fields: Record<string, unknown> = {};
  let message: string | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed)) {
      if (isRecord(parsed.error)) fields = parsed.error;
      else if (typeof parsed.error === 'string') message = parsed.error;
      else fields = parsed;
      if (message === undefined && typeof fields.message === 'string') message = fields.message;
      if (message === undefined && fields.detail !== undefined) message = typeof fields.detail === 'string' ? fields.detail : JSON.stringify(fields.detail);
    }
  } catch {
    // Not JSON: the text is the message.
  }
  if (message === undefined || message === '') message = text !== '' ? text : `The engine answered HTTP ${status} with no message.`;
  const type = typeof fields.type === 'string' && fields.type !== '' ? fields.type : status >= 500 ? 'server_error' : 'invalid_request_error';
  return {
    error: {
      message: message.length > ENGINE_MESSAGE_LIMIT ? `${message.slice(0, ENGINE_MESSAGE_LIMIT)}…` : message,
      type,
      param: typeof fields.param === 'string' ? fields.param : null,
      code: typeof fields.code === 'string' && fields.code !== '' ? fields.code : null,
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A whole HTTP/1.1 error response with `Connection: close`, as bytes to write on a socket that
 * has no response object (a refused head, a request timeout, Node's clientError).
 */
export function rawErrorResponse(kind: RouterErrorKind, message: string): Buffer {
  const shape = errorShape(kind);
  const text = JSON.stringify(errorBody(kind, message));
  const head = `HTTP/1.1 ${shape.status} ${STATUS_CODES[shape.status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n`;
  return Buffer.from(head + text, 'utf8');
}

/**
 * What to answer for an error Node's HTTP server reports on a client connection (its
 * `clientError`: a head or body its parser refuses, a request timeout), the way Node itself
 * picks the status: 431 for an over-large head, 408 for a timeout, 413 for over-long chunk
 * extensions, 400 for anything else. The message names Node's reason, never the bytes sent.
 */
export function clientErrorAnswer(error: { readonly code?: string; readonly reason?: string; readonly message?: string }): { kind: RouterErrorKind; message: string } {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { kind: 'headers_too_large', message: 'Request header fields are too large.' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { kind: 'request_timeout', message: 'The request did not arrive in time.' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { kind: 'body_too_large', message: 'Chunk extensions are too large.' };
    default: {
      const reason = error.reason ?? error.message ?? 'unparseable request';
      return { kind: 'bad_http_request', message: `Malformed HTTP request: ${reason}${error.code !== undefined ? ` (${error.code})` : ''}.` };
    }
  }
}
