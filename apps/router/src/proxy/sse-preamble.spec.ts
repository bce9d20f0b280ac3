import { readFileSync } from 'node:fs';
import { fixturePath } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { onlyPreamble } from './sse-preamble';

const chunk = (delta: object, extra: object = {}): string =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: null }], ...extra })}\n\n`;
const ROLE = chunk({ role: 'assistant', content: '' });

describe('onlyPreamble', () => {
  it.each([
    ['nothing yet', ''],
    ["a vLLM role chunk (content '')", ROLE],
    ['a role chunk with content null', chunk({ role: 'assistant', content: null })],
    ['a role chunk with empty tool_calls', chunk({ role: 'assistant', tool_calls: [] })],
    ['a role chunk with CRLF line ends', ROLE.replace('\n\n', '\r\n\r\n')],
    ['a comment, then a role chunk', `: keep-alive\n\n${ROLE}`],
    ['a role chunk, then half of the next event', `${ROLE}data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"Hi`],
  ])('holds on %s', (_name, text) => {
    expect(onlyPreamble(text)).toBe(true);
  });

  it.each([
    ['content', `${ROLE}${chunk({ content: 'Hi' })}`],
    ['role and content together', chunk({ role: 'assistant', content: 'Hi' })],
    ['a tool call', chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 't', function: { name: 'f', arguments: '' } }] })],
    ['reasoning', chunk({ reasoning_content: 'Let me think' })],
    ['a finish', `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`],
    ['usage', chunk({}, { usage: { prompt_tokens: 1 } })],
    ['[DONE]', `${ROLE}data: [DONE]\n\n`],
    ['an error event', `data: {"error":{"message":"boom"}}\n\n`],
    ['a text completion chunk', `data: ${JSON.stringify({ object: 'text_completion', choices: [{ index: 0, text: 'Hi' }] })}\n\n`],
    ['text that is not JSON', 'data: hello\n\n'],
    ['an event field other than data', `event: message\n${ROLE}`],
  ])('lets go on %s', (_name, text) => {
    expect(onlyPreamble(text)).toBe(false);
  });

  it('reads a recorded OpenAI stream: preamble up to its first delta with content, not after', () => {
    const recorded = readFileSync(fixturePath('openai', 'openai_chat_stream_173417d55340.sse'), 'utf8');
    const events = recorded.split('\n\n');
    expect(onlyPreamble(`${events[0]}\n\n`)).toBe(true);
    expect(onlyPreamble(`${events[0]}\n\n${events[1]}\n\n`)).toBe(false);
  });
});
