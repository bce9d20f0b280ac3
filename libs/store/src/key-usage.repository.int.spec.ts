import { testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HOUR_MS } from './key-usage.repository';
import { openStore, type Store } from './store.factory';

const H = Date.UTC(2026, 11, 2, 10);

describe.each(testBackends())('key usage on $name', (backend) => {
  let db: TestDatabase;
  let store: Store;
  beforeEach(async () => {
    db = await backend.create();
    store = await openStore(db.url);
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('adds reports to their hour, apart per key and model, and reads them from an hour on', async () => {
    await store.keyUsage.add([
      { key: 'search', model: 'llama', hour: H + 5, requests: 2, promptTokens: 100, completionTokens: 20 },
      { key: 'search', model: 'llama', hour: H + 59 * 60_000, requests: 1, promptTokens: 50, completionTokens: 5 },
      { key: 'search', model: 'qwen', hour: H, requests: 1, promptTokens: 7, completionTokens: 3 },
      { key: 'batch', model: 'llama', hour: H + HOUR_MS, requests: 4, promptTokens: 1_000_000_000_000, completionTokens: 1 },
    ]);
    await store.keyUsage.add([{ key: 'search', model: 'llama', hour: H + HOUR_MS - 1, requests: 1, promptTokens: 1, completionTokens: 1 }]);
    expect(await store.keyUsage.query(H, 'search')).toEqual([
      { key: 'search', model: 'llama', hour: H, requests: 4, promptTokens: 151, completionTokens: 26 },
      { key: 'search', model: 'qwen', hour: H, requests: 1, promptTokens: 7, completionTokens: 3 },
    ]);
    expect(await store.keyUsage.query(H + 30 * 60_000)).toHaveLength(3);
    expect(await store.keyUsage.query(H + HOUR_MS)).toEqual([{ key: 'batch', model: 'llama', hour: H + HOUR_MS, requests: 4, promptTokens: 1_000_000_000_000, completionTokens: 1 }]);
  });
});
