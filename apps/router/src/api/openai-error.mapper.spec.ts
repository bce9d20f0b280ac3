import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { errorBody, errorShape, sendError, sseErrorEvent, type RouterErrorKind } from './openai-error.mapper';

describe('errorShape', () => {
  it.each<[RouterErrorKind, number, string]>([
    ['unauthorized', 401, 'invalid_api_key'],
    ['unknown_route', 404, 'unknown_url'],
    ['method_not_allowed', 405, 'method_not_allowed'],
    ['invalid_json', 400, 'invalid_json'],
    ['invalid_request', 400, 'invalid_request'],
    ['model_not_found', 404, 'model_not_found'],
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
});
