import { ENGINE_CAPABILITIES } from '@llmgw/catalog';
import { DomainError, ENGINE_KINDS, type EngineKind } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { ADAPTERS, adapterFor } from './adapter.registry';

describe('adapterFor', () => {
  it.each(ENGINE_KINDS)('has an adapter for %s with the catalog capabilities', (kind) => {
    const a = adapterFor(kind);
    expect(a).toBe(ADAPTERS[kind]);
    expect(a.kind).toBe(kind);
    expect(a.capabilities).toBe(ENGINE_CAPABILITIES[kind]);
  });
  it('states each engine capability as ARCHITECTURE §4 does', () => {
    expect(ADAPTERS.vllm.capabilities).toMatchObject({ cpu: false, multiNode: true, tensorParallel: true });
    expect(ADAPTERS.llamacpp.capabilities).toMatchObject({ cpu: true, multiNode: false, tensorParallel: false });
  });
  it('refuses an unknown engine with a DomainError', () => {
    expect(() => adapterFor('tgi' as EngineKind)).toThrow(DomainError);
    expect(() => adapterFor('toString' as EngineKind)).toThrow('unknown engine "toString"');
  });
});
