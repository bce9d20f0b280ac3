import { ApiEndpoint, EngineKind, RoutingPolicy } from '@llmgw/proto';
import { describe, expect, it } from 'vitest';
import { keysFromProto, routingFromProto, snapshotFromProto } from './snapshot.mapper';

describe('snapshotFromProto', () => {
  it('converts the wire snapshot to domain types at the edge, leaving out engines it does not know', () => {
    const mapped = snapshotFromProto({
      revision: 7,
      endpoints: [
        { replicaId: 'r1', model: 'm', url: 'http://h:1', engine: EngineKind.ENGINE_KIND_VLLM, nodeId: 'n1', suspect: true },
        { replicaId: 'r2', model: 'm', url: 'http://h:2', engine: EngineKind.ENGINE_KIND_UNSPECIFIED, nodeId: 'n1', suspect: false },
      ],
      catalog: {
        revision: 3,
        models: [
          {
            name: 'm',
            aliases: ['a'],
            engine: EngineKind.ENGINE_KIND_LLAMACPP,
            metrics: { running: 'x:run', waiting: '', kvUsage: [], modelLabel: undefined },
            endpoints: [ApiEndpoint.API_ENDPOINT_CHAT, ApiEndpoint.API_ENDPOINT_COMPLETIONS],
          },
          // An older controller says nothing about endpoints; a newer one may name one this build does not know.
          { name: 'n', aliases: [], engine: EngineKind.ENGINE_KIND_VLLM, metrics: { kvUsage: [] }, endpoints: [], firstByteTimeoutMs: 30_000, stallTimeoutMs: 0 },
          { name: 'o', aliases: [], engine: EngineKind.ENGINE_KIND_VLLM, endpoints: [ApiEndpoint.API_ENDPOINT_EMBEDDINGS, 99 as ApiEndpoint] },
        ],
      },
    });
    expect(mapped).toEqual({
      snapshot: {
        revision: 7,
        endpoints: [{ replicaId: 'r1', model: 'm', url: 'http://h:1', engine: 'vllm', nodeId: 'n1', suspect: true }],
        catalog: {
          revision: 3,
          models: [
            { name: 'm', aliases: ['a'], engine: 'llamacpp', metrics: { running: 'x:run' }, endpoints: ['chat', 'completions'] },
            { name: 'n', aliases: [], engine: 'vllm', metrics: undefined, endpoints: undefined, firstByteTimeoutMs: 30_000 },
            { name: 'o', aliases: [], engine: 'vllm', metrics: undefined, endpoints: ['embeddings'] },
          ],
        },
      },
      dropped: [{ replicaId: 'r2', reason: 'unknown engine 0' }],
    });
  });

  it.each([
    ['unset', undefined, {}],
    ['unspecified', { policy: RoutingPolicy.ROUTING_POLICY_UNSPECIFIED }, {}],
    ['round-robin', { policy: RoutingPolicy.ROUTING_POLICY_ROUND_ROBIN }, { routing: { policy: 'round-robin' } }],
    [
      'prefix-affinity with parameters',
      { policy: RoutingPolicy.ROUTING_POLICY_PREFIX_AFFINITY, maxBlocks: 4, epsilon: 0.5 },
      { routing: { policy: 'prefix-affinity', prefixAffinity: { maxBlocks: 4, epsilon: 0.5 } } },
    ],
    ['a policy this build does not know', { policy: 42 as RoutingPolicy }, { problem: 'model m: unknown routing policy 42' }],
    [
      'parameters out of bounds',
      { policy: RoutingPolicy.ROUTING_POLICY_PREFIX_AFFINITY, epsilon: 0 },
      { problem: 'm.routing.prefixAffinity.epsilon: must be a number above 0 and at most 10 (got 0)' },
    ],
  ])('reads a model routing that is %s', (_what, wire, want) => {
    expect(routingFromProto(wire, 'm')).toEqual(want);
  });

  it('reads a snapshot without a catalog as one with no models', () => {
    expect(snapshotFromProto({ revision: 1, endpoints: [] }).snapshot.catalog.models).toEqual([]);
  });
});

describe('keysFromProto', () => {
  it('keeps well-formed keys with their limits (0 = none) and expiry, and leaves out a key that could match nothing', () => {
    const good = 'a'.repeat(64);
    expect(
      keysFromProto({
        keys: [
          { name: 'search', secretSha256: good, models: ['llama*'], limits: { requestsPerMinute: 120, tokensPerMinute: 0, concurrentRequests: 4, tokensPerDay: 0 }, expiresAtUnixMs: 1_900_000_000_000 },
          { name: 'batch', secretSha256: 'b'.repeat(64), models: ['*'], limits: undefined, expiresAtUnixMs: 0 },
          { name: 'bad-hash', secretSha256: 'not-hex', models: ['*'], limits: undefined, expiresAtUnixMs: 0 },
          { name: '', secretSha256: 'c'.repeat(64), models: ['*'], limits: undefined, expiresAtUnixMs: 0 },
        ],
      }),
    ).toEqual([
      { name: 'search', secretHash: good, models: ['llama*'], limits: { requestsPerMinute: 120, concurrentRequests: 4 }, expiresAt: 1_900_000_000_000 },
      { name: 'batch', secretHash: 'b'.repeat(64), models: ['*'], limits: {} },
    ]);
  });
});
