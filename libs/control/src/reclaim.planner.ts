import { isCacheName, type Catalog } from '@llmgw/catalog';
import type { GcPlanView } from '@llmgw/domain';
import type { NodeEntry } from './node.entry';

/**
 * What `gc` would ask each node to remove: cache entries whose name is a cache name
 * (`isCacheName`: only files llmgw fetched itself) that no model of the catalog wants. Anything
 * without a cache name was put there by someone else and is never listed. Without a catalog
 * nothing is listed (everything might be wanted). Nodes with nothing to collect are left out.
 */
export function gcPlan(nodes: ReadonlyMap<string, NodeEntry>, catalog: Catalog | undefined, catalogRevision: number): GcPlanView {
  const plan: GcPlanView = { catalogRevision, nodes: [], totalBytes: 0 };
  if (!catalog) return plan;
  const wanted = catalog.wantedCacheNames();
  for (const id of [...nodes.keys()].sort()) {
    const n = nodes.get(id) as NodeEntry;
    const entries = n.info.cache.entries
      .filter((e) => isCacheName(e.name) && !wanted.has(e.name))
      .map((e) => ({ name: e.name, sizeBytes: e.sizeBytes, modifiedAt: e.modifiedAt }))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    if (entries.length === 0) continue;
    const totalBytes = entries.reduce((sum, e) => sum + e.sizeBytes, 0);
    plan.nodes.push({ nodeId: id, connected: n.connected, entries, totalBytes });
    plan.totalBytes += totalBytes;
  }
  return plan;
}
