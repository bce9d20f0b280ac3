import type { Clock } from '@llmgw/domain';
import { shareOf, type AdmitRequest, type AdmitResult, type Limiter, type Ticket } from './limiter.port';

export interface SharedLimiterOptions {
  /** The fleet-wide limiter (Redis); absent when none is configured. */
  readonly shared?: Limiter;
  /** This router's own limiter: exact alone, or its share while `shared` is unreachable. */
  readonly local: Limiter;
  /** How many routers serve the fleet now (the controller's count of watchers), at least 1. */
  readonly routers: () => number;
  readonly clock: Clock;
  /** While degraded, how long to stay local before trying the shared store again (ms). */
  readonly retryMs: number;
  /** Called once per change: degraded (with the error that caused it) or back. */
  readonly onChange?: (degraded: boolean, error?: unknown) => void;
}

/**
 * The limiter a router admits through. With a shared store, every limit holds exactly across the
 * fleet. When the store fails or times out, the router enforces limit ÷ N on its own (N routers
 * the controller knows of), so the fleet together stays at the limit: never unlimited and never
 * refusing everything. It tries the store again every `retryMs` and goes back to it as soon as
 * it answers. Without a shared store, the router's own limiter is exact.
 */
export class SharedLimiter implements Limiter {
  private failedAt: number | undefined;

  constructor(private readonly options: SharedLimiterOptions) {}

  /** True while limits are enforced locally because the shared store is unreachable. */
  get degraded(): boolean {
    return this.failedAt !== undefined;
  }

  /**
   * The decision without waiting where one is at hand: this router's own limiter when there is no
   * shared store, a permit of a batch it holds when the store is healthy. While degraded, admit()
   * decides (it tries the store again when it is time).
   */
  admitNow(request: AdmitRequest): AdmitResult | undefined {
    const { shared, local } = this.options;
    if (shared === undefined) return local.admitNow?.(request);
    return this.failedAt === undefined ? shared.admitNow?.(request) : undefined;
  }

  async admit(request: AdmitRequest): Promise<AdmitResult> {
    const { shared, local } = this.options;
    if (shared === undefined) return local.admit(request);
    const now = this.options.clock.now();
    if (this.failedAt === undefined || now - this.failedAt >= this.options.retryMs) {
      try {
        const result = await shared.admit({ ...request, routers: this.options.routers() });
        // Spent from a batch the router already held: Redis was not asked, so says nothing of it.
        if (result.ticket?.batch === undefined) this.recovered();
        return result;
      } catch (error) {
        this.failed(now, error);
      }
    }
    return local.admit({ ...request, limits: shareOf(request.limits, this.options.routers()) });
  }

  settle(ticket: Ticket, usedTokens: number): Promise<void> | undefined {
    const { shared, local } = this.options;
    if (ticket.via === 'memory' || shared === undefined) return local.settle(ticket, usedTokens);
    // A failed write (refused at once or later): the claim stays in the store until its window and lease run out, never longer.
    try {
      return shared.settle(ticket, usedTokens)?.catch((error: unknown) => this.failed(this.options.clock.now(), error));
    } catch (error) {
      this.failed(this.options.clock.now(), error);
      return undefined;
    }
  }

  async renew(tickets: readonly Ticket[]): Promise<void> {
    const { shared, local } = this.options;
    await local.renew(tickets.filter((t) => t.via === 'memory'));
    const remote = tickets.filter((t) => t.via === 'redis');
    if (shared === undefined || remote.length === 0) return;
    try {
      await shared.renew(remote);
    } catch (error) {
      this.failed(this.options.clock.now(), error);
    }
  }

  /** Gives back what the shared store holds for this router ahead of use (its batches of permits): a router shutting down. */
  async close(): Promise<void> {
    await this.options.shared?.close?.().catch(() => undefined);
  }

  private failed(now: number, error: unknown): void {
    const was = this.failedAt !== undefined;
    this.failedAt = now;
    if (!was) this.options.onChange?.(true, error);
  }

  private recovered(): void {
    if (this.failedAt === undefined) return;
    this.failedAt = undefined;
    this.options.onChange?.(false);
  }
}
