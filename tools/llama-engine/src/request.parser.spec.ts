import { describe, expect, it } from 'vitest';
import { parseChatRequest, parseCompletionRequest, parseJsonBody, RequestError, SAMPLING_DEFAULTS } from './request.parser';

function refusal(fn: () => unknown): { message: string; param?: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof RequestError) return { message: error.message, param: error.param };
    throw error;
  }
  throw new Error('expected a RequestError');
}

describe('request parsing', () => {
  it('turns an OpenAI chat body into turns and sampling, with llama-server defaults', () => {
    const r = parseChatRequest(
      parseJsonBody(
        JSON.stringify({
          model: 'tiny',
          messages: [
            { role: 'developer', content: 'be brief' },
            { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
            { role: 'assistant', content: null },
          ],
          stream: true,
          stream_options: { include_usage: true },
          max_tokens: 9,
          stop: '###',
        }),
      ),
    );
    expect(r).toEqual({
      input: {
        kind: 'chat',
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'a\nb' },
          { role: 'assistant', content: '' },
        ],
      },
      stream: true,
      includeUsage: true,
      model: 'tiny',
      params: { maxTokens: 9, ...SAMPLING_DEFAULTS, seed: undefined, stop: ['###'] },
    });
  });

  it('reads max_completion_tokens before max_tokens, -1 as no limit, and seed -1 as random', () => {
    expect(parseCompletionRequest({ prompt: 'x', max_completion_tokens: 3, max_tokens: 7 }).params.maxTokens).toBe(3);
    expect(parseCompletionRequest({ prompt: 'x', n_predict: -1 }).params.maxTokens).toBeUndefined();
    expect(parseCompletionRequest({ prompt: 'x', seed: -1 }).params.seed).toBeUndefined();
    expect(parseCompletionRequest({ prompt: ['x'], seed: 42, temperature: 0 }).params).toMatchObject({ seed: 42, temperature: 0 });
  });

  it.each([
    ['{"messages": [', undefined, /^malformed JSON body/],
    ['[1]', undefined, /must be a JSON object/],
  ])('refuses the body %s', (text, param, message) => {
    const r = refusal(() => parseJsonBody(text));
    expect(r.param).toBe(param);
    expect(r.message).toMatch(message);
  });

  it.each([
    [{}, 'messages'],
    [{ messages: [] }, 'messages'],
    [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, 'messages[0].content[0]'],
    [{ messages: [{ role: 'user' }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: 'x' }], n: 2 }, 'n'],
    [{ messages: [{ role: 'user', content: 'x' }], temperature: -0.1 }, 'temperature'],
    [{ messages: [{ role: 'user', content: 'x' }], top_p: 2 }, 'top_p'],
    [{ messages: [{ role: 'user', content: 'x' }], max_tokens: 1.5 }, 'max_tokens'],
    [{ messages: [{ role: 'user', content: 'x' }], stream: 'yes' }, 'stream'],
    [{ messages: [{ role: 'user', content: 'x' }], stream_options: { include_usage: 1 } }, 'stream_options.include_usage'],
    [{ messages: [{ role: 'user', content: 'x' }], stop: [1] }, 'stop'],
    [{ messages: [{ role: 'user', content: 'x' }], seed: 'x' }, 'seed'],
  ])('refuses chat body %j naming %s', (body, param) => {
    expect(refusal(() => parseChatRequest(body)).param).toBe(param);
  });

  it.each([[{}], [{ prompt: 3 }], [{ prompt: ['a', 'b'] }], [{ prompt: [1, 2] }]])('refuses completion body %j', (body) => {
    expect(refusal(() => parseCompletionRequest(body)).param).toBe('prompt');
  });
});
