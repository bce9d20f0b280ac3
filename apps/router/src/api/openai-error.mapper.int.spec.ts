import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { clientErrorAnswer, ENGINE_ERROR_BODY_LIMIT, engineErrorBody, errorBody, errorShape, rawErrorResponse, sendError, sseErrorEvent, type RouterErrorKind } from './openai-error.mapper';

describe('errorShape', () => {
  it.each<[RouterErrorKind, number, string]>([
    ['unauthorized', 401, 'invalid_api_key'],
    ['unknown_route', 404, 'unknown_url'],
    ['method_not_allowed', 405, 'method_not_allowed'],
    ['invalid_json', 400, 'invalid_json'],
    ['json_too_deep', 400, 'json_too_deep'],
    ['invalid_request', 400, 'invalid_request'],
    ['bad_http_request', 400, 'bad_request'],
    ['headers_too_large', 431, 'request_header_fields_too_large'],
    ['expectation_failed', 417, 'expectation_failed'],
    ['request_timeout', 408, 'request_timeout'],
    ['model_not_found', 404, 'model_not_found'],
    ['endpoint_not_served', 400, 'unsupported_endpoint'],
    ['body_too_large', 413, 'request_too_large'],
    ['queue_full', 429, 'queue_full'],
    ['queue_timeout', 429, 'queue_timeout'],
    ['no_endpoints', 503, 'no_endpoints'],
    ['upstream_unavailable', 502, 'upstream_unavailable'],
    ['upstream_timeout', 504, 'upstream_timeout'],
    ['stream_interrupted', 502, 'stream_interrupted'],
    ['internal', 500, 'internal_error'],
  ])('%s → HTTP %i, code %s', (kind, status, code) => {
    expect(errorShape(kind)).toMatchObject({ status, code });
    expect(errorBody(kind, 'why', 'model')).toEqual({ error: { message: 'why', type: errorShape(kind).type, param: 'model', code } });
  });

  it('refuses a kind it does not know instead of inventing a status', () => {
    expect(() => errorShape('teapot' as RouterErrorKind)).toThrow(/unmapped/);
  });

  it('writes one SSE event with the OpenAI error body', () => {
    const event = sseErrorEvent('stream_interrupted', 'cut');
    expect(event).toMatch(/^data: .*\n\n$/);
    expect(JSON.parse(event.slice(6))).toEqual({ error: { message: 'cut', type: 'server_error', param: null, code: 'stream_interrupted' } });
  });

  it('sends a complete JSON response with extra headers', async () => {
    const server = createServer((_req, res) => void sendError(res, 'queue_full', 'busy', null, { 'retry-after': 7 }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('7');
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.json()).toEqual({ error: { message: 'busy', type: 'rate_limit_error', param: null, code: 'queue_full' } });
    } finally {
      server.close();
    }
  });

  it('writes a whole HTTP/1.1 response with the JSON body for a socket without a response object', () => {
    const text = rawErrorResponse('request_timeout', 'slow é').toString('utf8');
    const body = JSON.stringify(errorBody('request_timeout', 'slow é'));
    expect(text).toBe(`HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });

  it.each<[{ code?: string; reason?: string }, RouterErrorKind, string]>([
    [{ code: 'HPE_HEADER_OVERFLOW' }, 'headers_too_large', 'Request header fields are too large.'],
    [{ code: 'ERR_HTTP_REQUEST_TIMEOUT' }, 'request_timeout', 'The request did not arrive in time.'],
    [{ code: 'HPE_CHUNK_EXTENSIONS_OVERFLOW' }, 'body_too_large', 'Chunk extensions are too large.'],
    [{ code: 'HPE_INVALID_METHOD', reason: 'Invalid method encountered' }, 'bad_http_request', 'Malformed HTTP request: Invalid method encountered (HPE_INVALID_METHOD).'],
  ])("answers Node's clientError %j as Node picks the status", (error, kind, message) => {
    expect(clientErrorAnswer(error)).toEqual({ kind, message });
  });
});

describe('engineErrorBody', () => {
  const body = (message: string, type: string, param: string | null = null, code: string | null = null) => ({ error: { message, type, param, code } });

  it.each<[string, number, string, ReturnType<typeof body>]>([
    // What the tiny model's engine answered for POST /v1/embeddings (issue #13).
    ['llama.cpp, no type', 404, '{"error":{"code":404,"message":"File Not Found: POST /v1/embeddings"}}', body('File Not Found: POST /v1/embeddings', 'invalid_request_error')],
    // llama-server's format_error_response: {"error":{"code","message","type"}}.
    [
      'llama.cpp, with type',
      500,
      '{"error":{"code":500,"message":"response_format type must be one of \\"text\\" or \\"json_object\\"","type":"server_error"}}',
      body('response_format type must be one of "text" or "json_object"', 'server_error'),
    ],
    ['llama.cpp loading', 503, '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}', body('Loading model', 'unavailable_error')],
    // vLLM's ErrorResponse, before and after it moved under "error".
    ['older vLLM', 400, '{"object":"error","message":"max_tokens must be at least 1","type":"BadRequestError","param":null,"code":400}', body('max_tokens must be at least 1', 'BadRequestError')],
    ['newer vLLM', 404, '{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}', body('The model `x` does not exist.', 'NotFoundError', 'model')],
    ['already OpenAI-shaped', 429, '{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit"}}', body('slow down', 'rate_limit_error', null, 'rate_limit')],
    ['FastAPI detail', 404, '{"detail":"Not Found"}', body('Not Found', 'invalid_request_error')],
    ['FastAPI validation', 422, '{"detail":[{"loc":["body","model"],"msg":"field required"}]}', body('[{"loc":["body","model"],"msg":"field required"}]', 'invalid_request_error')],
    ['error as a string', 400, '{"error":"bad input"}', body('bad input', 'invalid_request_error')],
    ['plain text', 503, 'busy\n', body('busy', 'server_error')],
    ['HTML', 502, '<html><body>Bad Gateway</body></html>', body('<html><body>Bad Gateway</body></html>', 'server_error')],
    ['empty', 500, '', body('The engine answered HTTP 500 with no message.', 'server_error')],
    ['JSON without a message', 400, '{"error":{"code":400}}', body('{"error":{"code":400}}', 'invalid_request_error')],
    ['a JSON array', 400, '[1,2]', body('[1,2]', 'invalid_request_error')],
  ])('%s (HTTP %i)', (_name, status, raw, expected) => {
    expect(engineErrorBody(status, Buffer.from(raw))).toEqual(expected);
  });

  it('bounds a long message and never throws on bytes that are not UTF-8', () => {
    const long = engineErrorBody(500, Buffer.from(JSON.stringify({ error: { message: 'x'.repeat(ENGINE_ERROR_BODY_LIMIT) } })));
    expect(long.error.message.length).toBeLessThan(5_000);
    expect(engineErrorBody(500, Buffer.from([0xff, 0xfe, 0x00])).error).toMatchObject({ type: 'server_error', code: null });
  });
});
