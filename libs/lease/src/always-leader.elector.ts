import type { Clock, Rng } from '@llmgw/domain';
import { randomOwnerId } from './leader.elector';
import type { Leadership, LeadershipCallbacks } from './leadership.port';
import { NO_FENCE, type Fence } from './lease-store.port';

/**
 * Leadership when no lease is configured: this process leads unconditionally from start() to
 * stop() (single-controller installs, tests). Its fence is {@link NO_FENCE}, so writes are never
 * refused for leadership.
 */
export class AlwaysLeader implements Leadership {
  readonly ownerId: string;
  readonly generation: number | undefined = undefined;
  private leading = false;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    rng: Rng,
    private readonly callbacks: LeadershipCallbacks = {},
  ) {
    this.ownerId = randomOwnerId(rng);
  }

  /** True from construction until stop(): "no lease configured = leader" holds even before start(). */
  isLeader(): boolean {
    return !this.stopped;
  }

  fence(): Fence {
    return NO_FENCE;
  }

  start(): void {
    if (this.leading || this.stopped) return;
    this.leading = true;
    this.call(() => this.callbacks.onStartedLeading?.({ ownerId: this.ownerId, startedAt: this.clock.now() }));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (!this.leading) return;
    this.leading = false;
    this.call(() => this.callbacks.onStoppedLeading?.({ ownerId: this.ownerId, reason: 'stopped', at: this.clock.now() }));
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.callbacks.onError?.(error);
    }
  }
}
