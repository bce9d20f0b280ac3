import { readFileSync } from 'node:fs';
import { fixturePath } from '@llmgw/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { askForStreamUsage, JsonUsageTail, SseUsageTap } from './response-usage';

// A real api.openai.com stream recorded with include_usage: its usage chunk has `choices: []`.
const RECORDED = readFileSync(fixturePath('openai', 'openai_chat_stream_4cc50a6135d2.sse'));
const USAGE_EVENT = RECORDED.toString('utf8').split('\n\n').find((e) => e.includes('"choices":[],"usage"')) as string;
const WITHOUT_USAGE = Buffer.from(RECORDED.toString('utf8').replace(`${USAGE_EVENT}\n\n`, ''));

function run(tap: SseUsageTap, stream: Buffer, cuts: number[]): Buffer {
  const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let at = 0;
  for (const p of [...points, stream.length]) {
    out.push(tap.push(stream.subarray(at, p)));
    at = p;
  }
  out.push(tap.end());
  return Buffer.concat(out);
}

describe('SseUsageTap', () => {
  it('takes out the usage chunk the client did not ask for, however the stream is cut, and keeps every other byte', () => {
    expect(USAGE_EVENT).toBeDefined();
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), (cuts) => {
        const tap = new SseUsageTap(true);
        expect(run(tap, RECORDED, cuts).equals(WITHOUT_USAGE)).toBe(true);
        expect(tap.usage).toEqual({ promptTokens: 79, completionTokens: 1 });
      }),
    );
  });

  it('passes a stream whose client asked for usage through byte for byte, reading the usage on the way', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), (cuts) => {
        const tap = new SseUsageTap(false);
        expect(run(tap, RECORDED, cuts).equals(RECORDED)).toBe(true);
        expect(tap.usage).toEqual({ promptTokens: 79, completionTokens: 1 });
      }),
    );
  });

  it('keeps an event that merely mentions usage, and one cut off without its blank line', () => {
    const text = 'data: {"choices":[{"delta":{"content":"the \\"usage\\" field"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}';
    const tap = new SseUsageTap(true);
    const out = Buffer.concat([tap.push(Buffer.from(text)), tap.end()]).toString();
    expect(out).toBe('data: {"choices":[{"delta":{"content":"the \\"usage\\" field"}}]}\n\n');
    expect(tap.usage).toEqual({ promptTokens: 3, completionTokens: 2 });
  });
});

describe('askForStreamUsage', () => {
  const ask = (doc: unknown) => {
    const r = askForStreamUsage(Buffer.from(JSON.stringify(doc)));
    return { doc: JSON.parse(r.body.toString()), strip: r.strip };
  };

  it('asks the engine for usage on a stream that did not, keeping its other stream options, and says to strip it', () => {
    expect(ask({ model: 'm', stream: true })).toEqual({ doc: { model: 'm', stream: true, stream_options: { include_usage: true } }, strip: true });
    expect(ask({ stream: true, stream_options: { continuous_usage_stats: false } })).toEqual({ doc: { stream: true, stream_options: { continuous_usage_stats: false, include_usage: true } }, strip: true });
    expect(ask({ stream: true, stream_options: { include_usage: false } }).strip).toBe(true);
  });

  it('leaves alone what needs nothing or is the engine’s to refuse', () => {
    for (const doc of [{ model: 'm' }, { stream: false }, { stream: 'yes' }, { stream: true, stream_options: { include_usage: true } }, { stream: true, stream_options: 'x' }]) {
      const body = Buffer.from(JSON.stringify(doc));
      const r = askForStreamUsage(body);
      expect(r.strip, JSON.stringify(doc)).toBe(false);
      expect(r.body).toBe(body);
    }
  });
});

describe('JsonUsageTail', () => {
  it('reads the usage at the end of a large response, holding only its tail', () => {
    const body = Buffer.from(JSON.stringify({ data: [{ embedding: Array.from({ length: 20_000 }, (_, i) => i / 7) }], usage: { prompt_tokens: 12, total_tokens: 12 } }));
    const tail = new JsonUsageTail();
    for (let i = 0; i < body.length; i += 1_000) tail.push(body.subarray(i, i + 1_000));
    expect(tail.usage()).toEqual({ promptTokens: 12, completionTokens: 0 });
  });

  it('finds a usage followed by llama.cpp timings, and none where there is none', () => {
    const withTimings = new JsonUsageTail();
    withTimings.push(Buffer.from('{"choices":[],"usage":{"completion_tokens":5,"prompt_tokens":9,"total_tokens":14},"timings":{"prompt_n":9}}'));
    expect(withTimings.usage()).toEqual({ promptTokens: 9, completionTokens: 5 });
    const none = new JsonUsageTail();
    none.push(Buffer.from('{"error":{"message":"nope"}}'));
    expect(none.usage()).toBeUndefined();
  });
});
