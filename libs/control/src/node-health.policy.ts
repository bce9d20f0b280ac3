import type { NodeState } from '@llmgw/domain';

/** Heartbeat windows, ms: silent longer than `unreachableAfterMs` = unreachable, longer than `lostAfterMs` = lost. */
export interface HealthWindows {
  readonly unreachableAfterMs: number;
  readonly lostAfterMs: number;
}

/**
 * A node's health from the time it was last heard from. `since` is the newest of its last
 * heartbeat and the moment this controller began leading: a controller that has just taken over
 * gives every node the full windows to reconnect instead of declaring it lost from a stale row.
 * Silence exactly at a window's edge still counts as the earlier state.
 */
export function healthAt(since: number, now: number, windows: HealthWindows): NodeState {
  const silent = now - since;
  if (silent > windows.lostAfterMs) return 'lost';
  if (silent > windows.unreachableAfterMs) return 'unreachable';
  return 'healthy';
}
