import { describe, expect, it } from 'vitest';
import { KeyUsageTally } from './key-usage.tally';

describe('KeyUsageTally', () => {
  it('sums per key, model and UTC hour, empties on take, and takes a failed report back', () => {
    const t = new KeyUsageTally();
    const h = Date.UTC(2026, 11, 2, 10);
    t.add('a', 'llama', { promptTokens: 10, completionTokens: 2 }, h + 1);
    t.add('a', 'llama', { promptTokens: 5, completionTokens: 1 }, h + 3_599_999);
    t.add('a', 'llama', { promptTokens: 1, completionTokens: 1 }, h + 3_600_000);
    t.add('b', 'llama', { promptTokens: 7, completionTokens: 0 }, h);
    const taken = t.take();
    expect(taken).toEqual([
      { key: 'a', model: 'llama', hour: h, requests: 2, promptTokens: 15, completionTokens: 3 },
      { key: 'a', model: 'llama', hour: h + 3_600_000, requests: 1, promptTokens: 1, completionTokens: 1 },
      { key: 'b', model: 'llama', hour: h, requests: 1, promptTokens: 7, completionTokens: 0 },
    ]);
    expect(t.take()).toEqual([]);
    t.add('a', 'llama', { promptTokens: 1, completionTokens: 1 }, h);
    t.putBack(taken);
    expect(t.take()[0]).toEqual({ key: 'a', model: 'llama', hour: h, requests: 3, promptTokens: 16, completionTokens: 4 });
  });
});
