import { ErrorCode } from '@llmgw/domain';
import { FakeClock, testBackends, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from './store.factory';

const fields = { owner: 'team-search', models: ['llama', 'qwen-*'], limits: { requestsPerMinute: 120, concurrentRequests: 4 }, expiresAt: 1_900_000_000_000 };

describe.each(testBackends())('API keys on $name', (backend) => {
  let db: TestDatabase;
  let store: Store;
  const clock = new FakeClock(1_800_000_000_000);
  beforeEach(async () => {
    db = await backend.create();
    store = await openStore(db.url, { clock });
  });
  afterEach(async () => {
    await store.close();
    await db.drop();
  });

  it('round-trips a key exactly, absent expiry staying absent', async () => {
    const created = await store.apiKeys.create('search', fields, 'a'.repeat(64));
    expect(created).toEqual({ name: 'search', ...fields, secretHash: 'a'.repeat(64), createdAt: 1_800_000_000_000, updatedAt: 1_800_000_000_000, revision: 1 });
    expect(await store.apiKeys.get('search')).toEqual(created);
    const plain = await store.apiKeys.create('batch', { owner: 'ops', models: ['*'], limits: {} }, 'b'.repeat(64));
    expect(plain.expiresAt).toBeUndefined();
    expect((await store.apiKeys.list()).map((k) => k.name)).toEqual(['batch', 'search']);
    expect(await store.apiKeys.get('nope')).toBeUndefined();
  });

  it('refuses a second key with a taken name or secret hash, and stores nothing for it', async () => {
    await store.apiKeys.create('search', fields, 'a'.repeat(64));
    await expect(store.apiKeys.create('search', { ...fields, owner: 'intruder' }, 'c'.repeat(64))).rejects.toMatchObject({ code: ErrorCode.Conflict });
    await expect(store.apiKeys.create('other', fields, 'a'.repeat(64))).rejects.toMatchObject({ code: ErrorCode.Conflict });
    expect(await store.apiKeys.list()).toHaveLength(1);
    expect((await store.apiKeys.get('search'))?.owner).toBe('team-search');
  });

  it('updates only at the revision read, and never a revoked key', async () => {
    await store.apiKeys.create('search', fields, 'a'.repeat(64));
    clock.advance(1_000);
    const next = await store.apiKeys.update('search', { ...fields, limits: { tokensPerDay: 5 }, expiresAt: undefined }, 1);
    expect(next).toMatchObject({ revision: 2, limits: { tokensPerDay: 5 }, updatedAt: 1_800_000_001_000, createdAt: 1_800_000_000_000 });
    expect(next?.expiresAt).toBeUndefined();
    expect(await store.apiKeys.update('search', fields, 1)).toBeUndefined();
    const revoked = await store.apiKeys.revoke('search');
    expect(revoked).toMatchObject({ revision: 3, revokedAt: 1_800_000_001_000 });
    expect(await store.apiKeys.revoke('search')).toEqual(revoked);
    expect(await store.apiKeys.update('search', fields, 3)).toBeUndefined();
    expect(await store.apiKeys.revoke('nope')).toBeUndefined();
  });
});
