import { Writable } from 'node:stream';
import { openStore, type Store } from '@llmgw/store';
import { sqliteBackend, type TestDatabase } from '@llmgw/testing';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { catalogDoc, catalogFile } from '../test/controller.harness';
import { CatalogReloader } from './catalog.reloader';

let db: TestDatabase;
let store: Store;
const cleanups: (() => void)[] = [];

beforeEach(async () => {
  db = await sqliteBackend.create();
  store = await openStore(db.url);
});
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await store.close();
  await db.drop();
});

function reloader(): { reloader: CatalogReloader; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _e, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { reloader: new CatalogReloader(store.catalog, pino({ level: 'info' }, destination)), lines };
}

const INVALID = { models: [{ name: 'bad', source: 'hf://o/bad@main', size: 1, replicas: 1, profiles: [{ engine: 'vllm' }] }] };

describe('CatalogReloader', () => {
  it('seeds an empty store from the catalog file, and a second controller uses the stored one', async () => {
    const a = catalogFile(catalogDoc([{ name: 'llama', replicas: 2 }]));
    const b = catalogFile(catalogDoc([{ name: 'other', replicas: 1 }]));
    cleanups.push(a.cleanup, b.cleanup);
    const first = reloader().reloader;
    await first.start(a.path);
    expect(first.current()?.revision).toBe(1);
    expect(first.current()?.catalog.models.map((m) => m.name)).toEqual(['llama']);
    const second = reloader().reloader;
    await second.start(b.path);
    expect(second.current()?.catalog.models.map((m) => m.name)).toEqual(['llama']);
    expect(await store.catalog.currentRevision()).toBe(1);
  });

  it('refuses a catalog file that does not validate, naming the file and the problem', async () => {
    const bad = catalogFile(INVALID);
    cleanups.push(bad.cleanup);
    await expect(reloader().reloader.start(bad.path)).rejects.toThrow(new RegExp(`catalog file ${bad.path}:[\\s\\S]*gpuClass`));
  });

  it('swaps in a newer revision by reference; an invalid one keeps the current catalog, loudly, once', async () => {
    await store.catalog.put(catalogDoc([{ name: 'llama', replicas: 1 }]), 'test');
    const { reloader: r, lines } = reloader();
    const swaps: number[] = [];
    r.onSwap((next) => swaps.push(next.revision));
    await r.start(undefined);
    const held = r.current()?.catalog;
    expect(await r.poll()).toBe(false);

    await store.catalog.put(INVALID, 'test');
    expect(await r.poll()).toBe(false);
    expect(await r.poll()).toBe(false);
    expect(r.current()?.revision).toBe(1);
    expect(r.rejected()).toMatchObject({ revision: 2, error: expect.stringContaining('gpuClass') });
    const errors = lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0].msg).toBe('stored catalog revision 2 is invalid; keeping revision 1');

    await store.catalog.put(catalogDoc([{ name: 'llama', replicas: 1 }, { name: 'qwen', replicas: 1 }]), 'test');
    expect(await r.poll()).toBe(true);
    expect(r.current()?.revision).toBe(3);
    expect(r.rejected()).toBeUndefined();
    expect(swaps).toEqual([1, 3]);
    // A reader that took the old catalog still has it, unchanged.
    expect(held?.models.map((m) => m.name)).toEqual(['llama']);
  });

  it('starts from the newest valid revision when the newest is invalid, and from none when none is', async () => {
    await store.catalog.put(catalogDoc([{ name: 'llama', replicas: 1 }]), 'test');
    await store.catalog.put(INVALID, 'test');
    const r = reloader().reloader;
    await r.start(undefined);
    expect(r.current()?.revision).toBe(1);

    const empty = await sqliteBackend.create();
    const other = await openStore(empty.url);
    try {
      await other.catalog.put(INVALID, 'test');
      const none = new CatalogReloader(other.catalog, pino({ level: 'silent' }));
      await none.start(undefined);
      expect(none.current()).toBeUndefined();
    } finally {
      await other.close();
      await empty.drop();
    }
  });
});
