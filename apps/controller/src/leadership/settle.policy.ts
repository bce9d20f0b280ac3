/** What a new leader knows while it settles; times in ms. */
export interface SettleState {
  readonly now: number;
  /** The settling window's end (term start + LLMGW_CONTROLLER_SETTLE). */
  readonly settleUntil: number;
  /** The latest it may last while nodes that held replicas are missing (settleUntil + LLMGW_CONTROLLER_SETTLE_HOLDERS). */
  readonly holdersUntil: number;
  /** Nodes the store knew (not lost) when the term began. */
  readonly awaited: ReadonlySet<string>;
  /** Of those, the nodes the store said hold replicas. */
  readonly holders: ReadonlySet<string>;
  readonly connected: (nodeId: string) => boolean;
}

/** `settling` (keep listening) or `active`, with why, and the awaited nodes still missing. */
export type SettleDecision =
  | { readonly settled: false; readonly missing: readonly string[] }
  | { readonly settled: true; readonly why: 'all-back' | 'window-over' | 'holders-limit'; readonly missing: readonly string[] };

/**
 * When a new leader stops only listening and starts acting:
 * 1. at once when every awaited node is back (with none awaited — a new or emptied store — the
 *    whole window is waited, since nobody knows who is still to come);
 * 2. at the window's end when no node that held replicas is missing;
 * 3. else once the last of those is back, and at `holdersUntil` at the latest.
 * A replica whose agent is still reconnecting is thus not replaced for being late, while a node
 * that is really gone delays the cluster by a bounded time.
 */
export function settleDecision(s: SettleState): SettleDecision {
  const missing = [...s.awaited].filter((id) => !s.connected(id));
  if (s.awaited.size > 0 && missing.length === 0) return { settled: true, why: 'all-back', missing };
  if (s.now < s.settleUntil) return { settled: false, missing };
  const holdersMissing = missing.some((id) => s.holders.has(id));
  if (!holdersMissing) return { settled: true, why: 'window-over', missing };
  if (s.now < s.holdersUntil) return { settled: false, missing };
  return { settled: true, why: 'holders-limit', missing };
}
