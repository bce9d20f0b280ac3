import type { Clock } from '@llmgw/domain';
import type { BatchScheduler, SchedulerSnapshot, SequenceListener, SequenceSpec, SequenceStats } from './batch.scheduler';

/**
 * Runs a BatchScheduler against real time: after every change it arms one timer for the end of
 * the current step. A late timer is harmless: `advance` processes every step that has ended,
 * each starting where the previous one ended, so modelled throughput does not drift with timer
 * granularity (tokens simply arrive in small bursts when steps are shorter than a millisecond).
 */
export class SchedulerDriver {
  private timer?: NodeJS.Timeout;
  private armedFor?: number;

  constructor(
    readonly scheduler: BatchScheduler,
    private readonly clock: Clock,
  ) {}

  submit(spec: SequenceSpec, listener: SequenceListener): SequenceStats {
    const stats = this.scheduler.submit(spec, listener);
    this.rearm();
    return stats;
  }

  /** Stops a sequence; false when it had already ended. */
  cancel(stats: SequenceStats): boolean {
    const cancelled = this.scheduler.cancel(stats);
    this.rearm();
    return cancelled;
  }

  /** The scheduler's state as of now. */
  snapshot(): SchedulerSnapshot {
    this.scheduler.advance();
    this.rearm();
    return this.scheduler.snapshot();
  }

  /** Stops the timer; nothing progresses afterwards. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = undefined;
  }

  private rearm(): void {
    const next = this.scheduler.nextEventAt();
    if (next === undefined) {
      this.stop();
      return;
    }
    if (this.timer !== undefined && this.armedFor === next) return;
    this.stop();
    this.armedFor = next;
    this.timer = setTimeout(this.fire, Math.max(0, next - this.clock.now()));
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.armedFor = undefined;
    this.scheduler.advance();
    this.rearm();
  };
}
