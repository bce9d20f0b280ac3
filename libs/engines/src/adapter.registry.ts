import { DomainError, ENGINE_KINDS, ErrorCode, type EngineKind } from '@llmgw/domain';
import type { EngineAdapter } from './engine.adapter';
import { LlamaCppAdapter } from './llamacpp.adapter';
import { VllmAdapter } from './vllm.adapter';

/** One adapter per engine with default binaries (found on PATH). Build your own to set other paths. */
export const ADAPTERS: Readonly<Record<EngineKind, EngineAdapter>> = Object.freeze({
  vllm: new VllmAdapter(),
  llamacpp: new LlamaCppAdapter(),
});

/** The default adapter for an engine; throws a DomainError (InvalidArgument) for an unknown one. */
export function adapterFor(kind: EngineKind): EngineAdapter {
  const adapter = Object.prototype.hasOwnProperty.call(ADAPTERS, kind) ? ADAPTERS[kind] : undefined;
  if (!adapter) {
    throw new DomainError(ErrorCode.InvalidArgument, `unknown engine ${JSON.stringify(kind)} (known: ${ENGINE_KINDS.join(', ')})`, [
      { path: 'engine', message: `unknown engine ${JSON.stringify(kind)}` },
    ]);
  }
  return adapter;
}
