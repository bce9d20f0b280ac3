import { modelEndpoints, type Catalog } from '@llmgw/catalog';
import { engineUrl, type CatalogView, type Endpoint, type ModelView } from '@llmgw/domain';
import { resolveMapping } from '@llmgw/metrics-mappings';
import type { NodeEntry } from './node.entry';
import type { ReplicaEntry } from './replica.entry';

/**
 * The endpoints routers may use, sorted by replica id. Pure. A replica is an endpoint when it is
 * ready, its rank-0 member has a port, none of its nodes is lost or unknown, and its model is in
 * the catalog. It is `suspect` while any of its nodes is unreachable. Without a catalog (none
 * loaded yet) the model check is skipped rather than withdrawing everything.
 */
export function buildEndpoints(
  nodes: ReadonlyMap<string, NodeEntry>,
  replicas: Iterable<ReplicaEntry>,
  catalog: Catalog | undefined,
  memo?: EndpointMemo,
): Endpoint[] {
  const out: Endpoint[] = [];
  for (const entry of replicas) {
    const r = entry.replica;
    if (r.state !== 'ready') continue;
    const leader = r.members.find((m) => m.rank === 0);
    if (!leader || leader.port === undefined) continue;
    if (catalog !== undefined && catalog.get(r.model)?.name !== r.model) continue;
    let suspect = false;
    let usable = true;
    let nodesKey = '';
    for (const m of r.members) {
      const node = nodes.get(m.nodeId);
      if (!node || node.info.state === 'lost') {
        usable = false;
        break;
      }
      if (node.info.state === 'unreachable') suspect = true;
      if (memo) nodesKey += `${node.info.address}|`;
    }
    if (!usable) continue;
    const known = memo?.get(entry);
    if (known && known.nodesKey === nodesKey && known.endpoint.suspect === suspect) {
      out.push(known.endpoint);
      continue;
    }
    const address = (nodes.get(leader.nodeId) as NodeEntry).info.address;
    const endpoint: Endpoint = Object.freeze({ replicaId: r.id, model: r.model, url: engineUrl(address, leader.port), engine: r.engine, nodeId: leader.nodeId, suspect });
    memo?.set(entry, { nodesKey, endpoint });
    out.push(endpoint);
  }
  return out.sort((a, b) => (a.replicaId < b.replicaId ? -1 : a.replicaId > b.replicaId ? 1 : 0));
}

/**
 * Endpoints built before, by the (immutable) replica entry they came from: an unchanged replica
 * on unchanged nodes yields the very same Endpoint object, so "did anything change" is an
 * identity check and encoded bytes can be cached per endpoint.
 */
export type EndpointMemo = WeakMap<ReplicaEntry, { readonly nodesKey: string; readonly endpoint: Endpoint }>;

/**
 * What routers need of the catalog: names, aliases, the preferred profile's engine, the model's
 * metric mapping (validated through the engine's registry; absent = engine defaults), the API
 * endpoints it serves (explicit, or derived from its profiles: see `modelEndpoints`) and its
 * first-byte and stall deadlines and its routing policy (absent = the routers' defaults).
 */
export function buildCatalogView(catalog: Catalog | undefined, revision: number): CatalogView {
  const models: ModelView[] = (catalog?.models ?? []).map((m) => {
    const engine = m.profiles[0].engine;
    return {
      name: m.name,
      aliases: [...m.aliases],
      engine,
      ...(m.metrics !== undefined ? { metrics: resolveMapping(engine, m.metrics) } : {}),
      endpoints: modelEndpoints(m),
      ...(m.firstByteTimeoutMs !== undefined ? { firstByteTimeoutMs: m.firstByteTimeoutMs } : {}),
      ...(m.stallTimeoutMs !== undefined ? { stallTimeoutMs: m.stallTimeoutMs } : {}),
      ...(m.routing !== undefined ? { routing: m.routing } : {}),
    };
  });
  return { revision, models };
}
