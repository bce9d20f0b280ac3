import { inflateRawSync } from 'node:zlib';
import type { ApiEndpoint, Endpoint, EndpointSnapshot, EngineKind, ManagedKey, MetricMapping, ModelRouting, ModelView, RoutingPolicyName } from '@llmgw/domain';
import { parseRouting } from '@llmgw/catalog';
import {
  ApiEndpoint as ProtoApiEndpoint,
  EndpointSnapshot as WireSnapshot,
  EngineKind as ProtoEngineKind,
  type CompressedSnapshot,
  type KeySet,
  type MetricMapping as ProtoMetricMapping,
  type ModelRouting as ProtoModelRouting,
  RoutingPolicy as ProtoRoutingPolicy,
} from '@llmgw/proto';

/** The domain engine of a wire enum value; undefined for UNSPECIFIED and values this build does not know. */
export function engineFromProto(kind: ProtoEngineKind): EngineKind | undefined {
  switch (kind) {
    case ProtoEngineKind.ENGINE_KIND_VLLM:
      return 'vllm';
    case ProtoEngineKind.ENGINE_KIND_LLAMACPP:
      return 'llamacpp';
    default:
      return undefined;
  }
}

const API_ENDPOINT_FROM_PROTO: ReadonlyMap<ProtoApiEndpoint, ApiEndpoint> = new Map([
  [ProtoApiEndpoint.API_ENDPOINT_CHAT, 'chat'],
  [ProtoApiEndpoint.API_ENDPOINT_COMPLETIONS, 'completions'],
  [ProtoApiEndpoint.API_ENDPOINT_EMBEDDINGS, 'embeddings'],
]);

/**
 * The API endpoints a wire model serves. An empty list (a controller that does not say) is
 * undefined: every endpoint allowed. Values this build does not know are left out.
 */
function endpointsFromProto(list: readonly ProtoApiEndpoint[]): ApiEndpoint[] | undefined {
  if (list.length === 0) return undefined;
  const out: ApiEndpoint[] = [];
  for (const e of list) {
    const known = API_ENDPOINT_FROM_PROTO.get(e);
    if (known !== undefined && !out.includes(known)) out.push(known);
  }
  return out;
}

function mappingFromProto(m: ProtoMetricMapping | undefined): MetricMapping | undefined {
  if (m === undefined) return undefined;
  const out: MetricMapping = {};
  if (m.running !== undefined && m.running !== '') out.running = m.running;
  if (m.waiting !== undefined && m.waiting !== '') out.waiting = m.waiting;
  if (m.kvUsage.length > 0) out.kvUsage = [...m.kvUsage];
  if (m.modelLabel !== undefined && m.modelLabel !== '') out.modelLabel = m.modelLabel;
  return Object.keys(out).length > 0 ? out : undefined;
}

const ROUTING_POLICY_FROM_PROTO: ReadonlyMap<ProtoRoutingPolicy, RoutingPolicyName> = new Map([
  [ProtoRoutingPolicy.ROUTING_POLICY_LEAST_LOAD, 'least-load'],
  [ProtoRoutingPolicy.ROUTING_POLICY_PREFIX_AFFINITY, 'prefix-affinity'],
  [ProtoRoutingPolicy.ROUTING_POLICY_ROUND_ROBIN, 'round-robin'],
]);

/**
 * A wire model's routing, checked again with the catalog's own rules (libs/catalog parseRouting).
 * Unset, an unknown policy (a newer controller) or parameters this build refuses: undefined, the
 * router's default for each API, with the problem returned to be reported.
 */
export function routingFromProto(r: ProtoModelRouting | undefined, model: string): { routing?: ModelRouting; problem?: string } {
  if (r === undefined || r.policy === ProtoRoutingPolicy.ROUTING_POLICY_UNSPECIFIED) return {};
  const policy = ROUTING_POLICY_FROM_PROTO.get(r.policy);
  if (policy === undefined) return { problem: `model ${model}: unknown routing policy ${String(r.policy)}` };
  const params = {
    ...(r.blockChars !== undefined ? { blockChars: r.blockChars } : {}),
    ...(r.maxBlocks !== undefined ? { maxBlocks: r.maxBlocks } : {}),
    ...(r.epsilon !== undefined ? { epsilon: r.epsilon } : {}),
  };
  const parsed = parseRouting({ policy, ...(Object.keys(params).length > 0 ? { prefixAffinity: params } : {}) }, `${model}.routing`);
  if (!parsed.ok) return { problem: parsed.problems.map((p) => `${p.path}: ${p.message}`).join('; ') };
  return { routing: parsed.routing };
}

/**
 * A wire snapshot as the domain snapshot (the same contract an in-process controller publishes),
 * plus the endpoints it had to leave out and why.
 */
export interface MappedSnapshot {
  readonly snapshot: EndpointSnapshot;
  readonly dropped: readonly { readonly replicaId: string; readonly reason: string }[];
  /** Models whose routing this router could not take (they route by its default), and why. */
  readonly routingProblems?: readonly string[];
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Wire keys → what the authenticator holds; a key without a well-formed hash or name is left out (it could match nothing). */
export function keysFromProto(set: KeySet): ManagedKey[] {
  const keys: ManagedKey[] = [];
  for (const k of set.keys) {
    if (!SHA256_HEX.test(k.secretSha256) || k.name === '') continue;
    const l = k.limits;
    const limit = (v: number | undefined): number | undefined => (v !== undefined && v > 0 ? v : undefined);
    const limits = {
      ...(limit(l?.requestsPerMinute) !== undefined && { requestsPerMinute: l?.requestsPerMinute }),
      ...(limit(l?.tokensPerMinute) !== undefined && { tokensPerMinute: l?.tokensPerMinute }),
      ...(limit(l?.concurrentRequests) !== undefined && { concurrentRequests: l?.concurrentRequests }),
      ...(limit(l?.tokensPerDay) !== undefined && { tokensPerDay: l?.tokensPerDay }),
    };
    keys.push({ name: k.name, secretHash: k.secretSha256, models: [...k.models], limits, ...(k.expiresAtUnixMs > 0 && { expiresAt: k.expiresAtUnixMs }) });
  }
  return keys;
}

/**
 * Converts a wire snapshot at the router's edge. An endpoint whose engine this router does not
 * know is dropped (reported, never guessed); the rest of the snapshot still applies.
 */
export function snapshotFromProto(s: WireSnapshot): MappedSnapshot {
  const dropped: { replicaId: string; reason: string }[] = [];
  const endpoints: Endpoint[] = [];
  for (const e of s.endpoints) {
    const engine = engineFromProto(e.engine);
    if (engine === undefined) {
      dropped.push({ replicaId: e.replicaId, reason: `unknown engine ${String(e.engine)}` });
      continue;
    }
    endpoints.push({ replicaId: e.replicaId, model: e.model, url: e.url, engine, nodeId: e.nodeId, suspect: e.suspect });
  }
  const routingProblems: string[] = [];
  const models: ModelView[] = (s.catalog?.models ?? []).map((m) => {
    const { routing, problem } = routingFromProto(m.routing, m.name);
    if (problem !== undefined) routingProblems.push(problem);
    return {
      name: m.name,
      aliases: [...m.aliases],
      engine: engineFromProto(m.engine),
      metrics: mappingFromProto(m.metrics),
      endpoints: endpointsFromProto(m.endpoints),
      // 0 is not a deadline: a controller that sends it is treated as having sent none.
      ...(m.firstByteTimeoutMs ? { firstByteTimeoutMs: m.firstByteTimeoutMs } : {}),
      ...(m.stallTimeoutMs ? { stallTimeoutMs: m.stallTimeoutMs } : {}),
      ...(routing !== undefined ? { routing } : {}),
    };
  });
  const snapshot: EndpointSnapshot = {
    revision: s.revision,
    endpoints,
    catalog: { revision: s.catalog?.revision ?? 0, models },
    ...(s.keys !== undefined && { keys: { keys: keysFromProto(s.keys) } }),
    ...(s.routers !== undefined && s.routers > 0 && { routers: s.routers }),
  };
  return { snapshot, dropped, ...(routingProblems.length > 0 ? { routingProblems } : {}) };
}

/**
 * The EndpointSnapshot inside `WatchResponse.compressed`: raw-inflated, refusing to produce more
 * than `maxBytes` (a decompression bomb costs at most that), then decoded. Throws when the bytes
 * do not inflate, inflate past `maxBytes`, or do not decode.
 */
export function inflateSnapshot(c: CompressedSnapshot, maxBytes: number): WireSnapshot {
  let bytes: Buffer;
  try {
    bytes = inflateRawSync(c.deflate, { maxOutputLength: maxBytes });
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_BUFFER_TOO_LARGE') throw new Error(`inflates to more than ${maxBytes} bytes`);
    throw new Error(`does not inflate: ${(error as Error).message}`);
  }
  try {
    return WireSnapshot.decode(bytes);
  } catch (error) {
    throw new Error(`does not decode as an EndpointSnapshot: ${(error as Error).message}`);
  }
}
