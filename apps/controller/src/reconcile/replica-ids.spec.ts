import { describe, expect, it } from 'vitest';
import { cryptoReplicaIds, replicaId, sequentialReplicaIds } from './replica-ids';

describe('replica ids', () => {
  it.each([
    ['llama-3.1-8b', 'llama-3.1-8b-x'],
    ['org/Model Name', 'org-Model-Name-x'],
    ['--odd', 'odd-x'],
    ['///', 'replica-x'],
    ['m'.repeat(80), `${'m'.repeat(48)}-x`],
  ])('%s slugs to %s', (model, id) => {
    expect(replicaId(model, 'x')).toBe(id);
  });

  it('the crypto source gives 12 hex digits after the slug, a new one every time', () => {
    const a = cryptoReplicaIds.next('llama');
    expect(a).toMatch(/^llama-[0-9a-f]{12}$/);
    expect(cryptoReplicaIds.next('llama')).not.toBe(a);
  });

  it('the sequential source gives the same ids on every run', () => {
    const ids = (): string[] => {
      const s = sequentialReplicaIds();
      return [s.next('a'), s.next('b'), s.next('a')];
    };
    expect(ids()).toEqual(['a-000000000001', 'b-000000000002', 'a-000000000003']);
    expect(ids()).toEqual(ids());
  });
});
