import type { Logger } from 'pino';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { KeyUsageTally } from './key-usage.tally';
import type { UsageSink } from './usage.sink';

/**
 * Once a tick, sends the map replica → last-used to a {@link UsageSink}. The timestamps are
 * written when a request acquires an endpoint (no extra work per request); this only reads
 * them. Nothing is sent while nothing has been used: a replica this router has not used is
 * unknown to it, never idle.
 */
export class UsageReporter {
  private timer: NodeJS.Timeout | undefined;
  private sending = false;

  constructor(
    private readonly registry: EndpointRegistry,
    private readonly sink: UsageSink,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    private readonly onResult?: (ok: boolean) => void,
    private readonly keyUsage?: KeyUsageTally,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  /** Sends one report now (also called at shutdown, so the last tick's uses are not lost). */
  async tick(): Promise<void> {
    if (this.sending) return;
    const usage = this.registry.collectUsage();
    const keyed = this.keyUsage?.take() ?? [];
    if (usage.size === 0 && keyed.length === 0) return;
    this.sending = true;
    try {
      await this.sink.report(usage, keyed);
      this.onResult?.(true);
    } catch (error) {
      this.keyUsage?.putBack(keyed);
      this.onResult?.(false);
      this.logger.warn({ err: error instanceof Error ? error.message : String(error), replicas: usage.size }, 'usage report failed');
    } finally {
      this.sending = false;
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
