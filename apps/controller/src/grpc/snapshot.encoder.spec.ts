import { inflateRawSync } from 'node:zlib';
import { EndpointSnapshot as WireSnapshot, WatchResponse } from '@llmgw/proto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EndpointSnapshot } from '@llmgw/domain';
import { encodeCompressedWatchResponse, encodeWatchResponse, encodeWatchResponseSlowly, snapshotPayload, snapshotToProto } from './snapshot.encoder';

const endpoint = fc.record({
  replicaId: fc.string({ maxLength: 40 }),
  model: fc.string({ maxLength: 200 }),
  url: fc.webUrl(),
  engine: fc.constantFrom('vllm' as const, 'llamacpp' as const),
  nodeId: fc.string({ maxLength: 20 }),
  suspect: fc.boolean(),
});
const model = fc.record(
  {
    name: fc.string({ minLength: 1, maxLength: 30 }),
    aliases: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }),
    engine: fc.constantFrom('vllm' as const, 'llamacpp' as const),
    metrics: fc.record({ running: fc.string({ maxLength: 10 }), kvUsage: fc.array(fc.string({ maxLength: 10 }), { maxLength: 2 }) }, { requiredKeys: [] }),
    endpoints: fc.subarray(['chat', 'completions', 'embeddings'] as const),
    firstByteTimeoutMs: fc.integer({ min: 100, max: 3_600_000 }),
    stallTimeoutMs: fc.integer({ min: 100, max: 3_600_000 }),
    routing: fc.oneof(
      fc.record({ policy: fc.constantFrom('least-load' as const, 'round-robin' as const) }),
      fc.record(
        {
          policy: fc.constant('prefix-affinity' as const),
          prefixAffinity: fc.record({ blockChars: fc.integer({ min: 16, max: 65_536 }), maxBlocks: fc.integer({ min: 1, max: 1024 }), epsilon: fc.double({ min: 0.01, max: 10, noNaN: true }) }, { requiredKeys: [] }),
        },
        { requiredKeys: ['policy'] },
      ),
    ),
  },
  { requiredKeys: ['name', 'aliases', 'engine', 'endpoints'] },
);
const key = fc.record(
  {
    name: fc.string({ maxLength: 20 }),
    secretHash: fc.stringMatching(/^[0-9a-f]{64}$/),
    models: fc.array(fc.string({ maxLength: 12 }), { maxLength: 3 }),
    limits: fc.record({ requestsPerMinute: fc.integer({ min: 1, max: 1e9 }), tokensPerMinute: fc.integer({ min: 1, max: 1e9 }), concurrentRequests: fc.integer({ min: 1, max: 1e9 }), tokensPerDay: fc.integer({ min: 1, max: 1e9 }) }, { requiredKeys: [] }),
    expiresAt: fc.integer({ min: 1, max: 2 ** 45 }),
  },
  { requiredKeys: ['name', 'secretHash', 'models', 'limits'] },
);
const snapshot = fc.record(
  {
    revision: fc.oneof(fc.constant(0), fc.nat(), fc.integer({ min: 2 ** 31, max: Number.MAX_SAFE_INTEGER })),
    endpoints: fc.array(endpoint, { maxLength: 30 }),
    catalog: fc.record({ revision: fc.nat(), models: fc.array(model, { maxLength: 10 }) }),
    keys: fc.record({ keys: fc.array(key, { maxLength: 5 }) }),
    routers: fc.nat({ max: 100_000 }),
  },
  { requiredKeys: ['revision', 'endpoints', 'catalog'] },
);

describe('encodeWatchResponse', () => {
  it('writes exactly the bytes of the generated encoder, and decodes back', () => {
    fc.assert(
      fc.property(snapshot, (s: EndpointSnapshot) => {
        const fast = encodeWatchResponse(s);
        expect(fast.equals(encodeWatchResponseSlowly(s))).toBe(true);
        expect(WatchResponse.decode(fast).snapshot?.endpoints.length).toBe(s.endpoints.length);
      }),
      { numRuns: 300 },
    );
  });

  it("carries a model's routing policy and only the parameters the catalog set", () => {
    const models = [
      { name: 'a', aliases: [], engine: 'vllm' as const, endpoints: ['chat' as const], routing: { policy: 'prefix-affinity' as const, prefixAffinity: { maxBlocks: 4, epsilon: 0.5 } } },
      { name: 'b', aliases: [], engine: 'vllm' as const, endpoints: ['chat' as const], routing: { policy: 'round-robin' as const } },
      { name: 'c', aliases: [], engine: 'vllm' as const, endpoints: ['chat' as const] },
    ];
    const wire = WatchResponse.decode(encodeWatchResponse({ revision: 1, endpoints: [], catalog: { revision: 1, models } })).snapshot?.catalog?.models;
    expect(wire?.map((m) => m.routing)).toEqual([{ policy: 2, maxBlocks: 4, epsilon: 0.5 }, { policy: 3 }, undefined]);
  });

  it('reuses the encoding of an endpoint that stays the same object across revisions', () => {
    const e = { replicaId: 'r1', model: 'm', url: 'http://a:1', engine: 'vllm' as const, nodeId: 'n', suspect: false };
    const catalog = { revision: 1, models: [] };
    const a = encodeWatchResponse({ revision: 1, endpoints: [e], catalog });
    const b = encodeWatchResponse({ revision: 2, endpoints: [e, { ...e, replicaId: 'r2' }], catalog });
    expect(WatchResponse.decode(a).snapshot?.revision).toBe(1);
    expect(WatchResponse.decode(b).snapshot?.endpoints.map((x) => x.replicaId)).toEqual(['r1', 'r2']);
  });
});

describe('encodeCompressedWatchResponse', () => {
  it('carries the revision and inflates to exactly the EndpointSnapshot bytes the plain form sends', () => {
    fc.assert(
      fc.property(snapshot, (s: EndpointSnapshot) => {
        const bytes = encodeCompressedWatchResponse(s);
        const message = WatchResponse.decode(bytes);
        expect(message.snapshot).toBeUndefined();
        expect(message.compressed?.revision).toBe(s.revision);
        const inflated = inflateRawSync(message.compressed?.deflate ?? Buffer.alloc(0));
        // The plain form's payload, and what the generated encoder writes for the snapshot.
        expect(inflated.equals(snapshotPayload(encodeWatchResponse(s)))).toBe(true);
        expect(inflated.equals(WireSnapshot.encode(snapshotToProto(s)).finish())).toBe(true);
        // Hand-built, yet byte for byte what the generated encoder writes for the same message.
        expect(bytes.equals(WatchResponse.encode(message).finish())).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('compresses a snapshot once: every call for the same object returns the same Buffer', () => {
    const e = { replicaId: 'r1', model: 'm', url: 'http://a:1', engine: 'vllm' as const, nodeId: 'n', suspect: false };
    const s = { revision: 7, endpoints: Array.from({ length: 50 }, (_, i) => ({ ...e, replicaId: `r${i}` })), catalog: { revision: 1, models: [] } };
    const first = encodeCompressedWatchResponse(s);
    expect(encodeCompressedWatchResponse(s)).toBe(first);
    expect(first.length).toBeLessThan(encodeWatchResponse(s).length);
    // An equal snapshot that is another object is another revision's message: encoded on its own.
    expect(encodeCompressedWatchResponse({ ...s })).not.toBe(first);
    expect(encodeCompressedWatchResponse({ ...s }).equals(first)).toBe(true);
  });
});
