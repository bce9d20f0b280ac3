import { describe, expect, it } from 'vitest';
import { countTokens, outputTokenText, renderChat, tokenize } from './prompt.tokenizer';

describe('tokenize', () => {
  it.each([
    ['', 0],
    ['   ', 0],
    ['Hello', 1],
    ['The quick brown fox jumps over the lazy dog.', 10],
    ['internationalization', 4], // 6-letter pieces
    ['1234567', 3], // 3-digit pieces
    ['你好世界', 4], // one per CJK character
    ['a,b', 3],
    ['naïve café', 2],
  ])('%j has %i tokens', (text, n) => {
    expect(countTokens(text)).toBe(n);
  });

  it('is deterministic and distinguishes leading spaces and newlines', () => {
    expect(tokenize('hello world')).toEqual(tokenize('hello world'));
    const [, spaced] = tokenize('a b');
    const [, joined] = tokenize('a\nb');
    expect(spaced).not.toBe(joined);
    expect(tokenize('ab')).toHaveLength(1);
    expect(tokenize('x hello')[1]).not.toBe(tokenize('hello')[0]); // ' hello' is not 'hello'
  });

  it('estimates roughly 4-5 characters per token on English prose', () => {
    const prose =
      'Continuous batching lets an inference engine admit new requests between decode steps, so a short request does not wait for a long one to finish. ' +
      'The scheduler keeps a waiting queue and a running set, and admits from the queue whenever a slot and enough key-value cache are free.';
    const ratio = prose.length / countTokens(prose);
    expect(ratio).toBeGreaterThan(3.5);
    expect(ratio).toBeLessThan(6);
  });
});

describe('renderChat', () => {
  it('renders roles in order and gives conversations with a common start a common token prefix', () => {
    const system = { role: 'system', content: 'You are terse. '.repeat(20) };
    const a = tokenize(renderChat([system, { role: 'user', content: 'first question' }]));
    const b = tokenize(renderChat([system, { role: 'user', content: 'second one' }]));
    let common = 0;
    while (a[common] === b[common]) common++;
    expect(common).toBeGreaterThan(40);
    expect(renderChat([{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: 'x' } }] }])).toBe(
      '<|user|>\nhi{"type":"image_url","image_url":{"url":"x"}}\n<|assistant|>\n',
    );
  });

  it('puts tools first and counts null content as empty', () => {
    expect(renderChat([{ role: 'assistant', content: null }], [{ type: 'function' }])).toBe('<|tools|>\n[{"type":"function"}]\n<|assistant|>\n\n<|assistant|>\n');
  });
});

describe('outputTokenText', () => {
  it('starts the first token without a space and later ones with one', () => {
    expect(outputTokenText(0, 0)).toBe('the');
    expect(outputTokenText(1, 0)).toBe(' the');
    expect(outputTokenText(3, 0.999999)).toMatch(/^ \w+$/);
  });
});
