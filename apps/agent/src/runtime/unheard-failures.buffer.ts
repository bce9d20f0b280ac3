import type { ReplicaStatus, UnheardFailure } from '@llmgw/proto';

/** Most failures kept until a leader listens; older ones are dropped (and counted). */
export const UNHEARD_FAILURES_MAX = 64;

/**
 * Engine failures that happened while no leader listened, kept until the next Welcome, when they
 * go out as one `UnheardFailures` message (`take()` empties the buffer).
 */
export class UnheardFailures {
  private items: UnheardFailure[] = [];
  /** Failures dropped because the buffer was full, since the last take(). */
  private droppedValue = 0;

  /** Keeps `status` (a FAILED ReplicaStatus) that could not be sent at `atUnixMs`. */
  record(status: ReplicaStatus, atUnixMs: number): void {
    this.items.push({ status, atUnixMs });
    if (this.items.length > UNHEARD_FAILURES_MAX) {
      const over = this.items.length - UNHEARD_FAILURES_MAX;
      this.items.splice(0, over);
      this.droppedValue += over;
    }
  }

  /** Everything kept, oldest first, and how many older ones were dropped; the buffer is empty after. */
  take(): { failures: UnheardFailure[]; dropped: number } {
    const out = { failures: this.items, dropped: this.droppedValue };
    this.items = [];
    this.droppedValue = 0;
    return out;
  }

  get size(): number {
    return this.items.length;
  }
}
