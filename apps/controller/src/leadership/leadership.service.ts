import { randomInt } from 'node:crypto';
import { timerScheduler, type Clock, type Rng } from '@llmgw/domain';
import { AlwaysLeader, holderRenewing, LeaderElector, type Fence, type Leadership, type LeadershipEnd, type LeadershipTerm } from '@llmgw/lease';
import type { Logger } from 'pino';
import { AdvertisedLeaseStore, type Advertised, type LeaseHolder, type LeaseReader } from './advertised-lease.store';

/** Lease settings; unset = this controller always leads. Times in ms. */
export interface LeaseSettings {
  readonly name: string;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
}

/** What the rest of the controller is told when leadership changes. */
export interface LeadershipListener {
  startedLeading(term: LeadershipTerm): void;
  stoppedLeading(end: LeadershipEnd): void;
}

/** How long one read of the lease holder answers {@link LeadershipService.leaderElsewhere}, ms. */
export const LEADER_LOOKUP_REUSE_MS = 250;

/** Uniform randomness from the operating system's generator (owner ids must not repeat across starts). */
export const cryptoRng: Rng = { next: () => randomInt(0, 2 ** 47) / 2 ** 47 };

/**
 * Leadership for this process: a lease in the store when `settings` is given (LeaderElector),
 * otherwise unconditional (AlwaysLeader). Fences come out in the form the store checks, and a
 * standby can name the current holder's advertised address.
 */
export class LeadershipService {
  readonly leadership: Leadership;
  private readonly leases: AdvertisedLeaseStore | undefined;
  private readonly log: Logger;
  private lastLookup: { readonly at: number; readonly answer: Promise<LeaseHolder | undefined> } | undefined;
  private readonly listeners: LeadershipListener[] = [];

  constructor(
    private readonly settings: LeaseSettings | undefined,
    leaseStore: LeaseReader,
    advertised: Advertised,
    private readonly clock: Clock,
    /** Told first of every change; more listen through {@link listen}. */
    listener: LeadershipListener | undefined,
    logger: Logger,
    rng: Rng = cryptoRng,
  ) {
    this.log = logger.child({ context: 'LeadershipService' });
    if (listener) this.listeners.push(listener);
    const callbacks = {
      onStartedLeading: (term: LeadershipTerm) => {
        this.log.info({ owner: term.ownerId, generation: term.generation }, 'started leading');
        for (const l of this.listeners) l.startedLeading(term);
      },
      onStoppedLeading: (end: LeadershipEnd) => {
        this.log.warn({ owner: end.ownerId, generation: end.generation, reason: end.reason }, 'stopped leading');
        for (const l of this.listeners) l.stoppedLeading(end);
      },
      onError: (error: unknown) => this.log.warn({ err: error }, 'lease: store call failed; keeping the current claim until it lapses'),
    };
    if (settings === undefined) {
      this.leadership = new AlwaysLeader(clock, rng, callbacks);
    } else {
      this.leases = new AdvertisedLeaseStore(leaseStore, advertised);
      this.leadership = new LeaderElector({
        store: this.leases,
        clock,
        rng,
        scheduler: timerScheduler,
        name: settings.name,
        ttlMs: settings.ttlMs,
        renewIntervalMs: settings.renewIntervalMs,
        ...callbacks,
      });
    }
  }

  /** Tells `listener` of every later change of leadership (join before {@link start}). */
  listen(listener: LeadershipListener): void {
    this.listeners.push(listener);
  }

  get ownerId(): string {
    return this.leadership.ownerId;
  }

  /** The lease name, or undefined when no lease is configured. */
  get leaseName(): string | undefined {
    return this.settings?.name;
  }

  isLeader(): boolean {
    return this.leadership.isLeader();
  }

  get generation(): number | undefined {
    return this.leadership.generation;
  }

  /** The fence for a store write; throws DomainError `fenced` when not leading. */
  fence(): Fence {
    const fence = this.leadership.fence();
    return this.leases ? this.leases.storedFence(fence) : fence;
  }

  /** Who holds the lease now (undefined without a lease or when nobody does). */
  async holder(): Promise<LeaseHolder | undefined> {
    if (!this.leases || !this.settings) return undefined;
    return this.leases.holder(this.settings.name);
  }

  /**
   * Where another controller leads, as a standby tells agents and routers: the advertised address
   * of a holder that is still renewing its claim (see holderRenewing), else undefined — a leader
   * that died is not named while its row is unexpired, nor one that advertised no address.
   */
  async leaderElsewhere(): Promise<string | undefined> {
    return (await this.liveHolderElsewhere())?.address;
  }

  /** The admin API base URL of another controller that leads and is still renewing its claim, else undefined. */
  async leaderAdminUrl(): Promise<string | undefined> {
    return (await this.liveHolderElsewhere())?.adminUrl;
  }

  private liveHolderElsewhere(): Promise<LeaseHolder | undefined> {
    const settings = this.settings;
    if (!settings) return Promise.resolve(undefined);
    // Every Register and Watch a standby turns away asks this; while no leader answers, agents
    // and routers ask every few hundred ms. One store read serves them all for a short while.
    const now = this.clock.now();
    if (this.lastLookup !== undefined && now - this.lastLookup.at < LEADER_LOOKUP_REUSE_MS) return this.lastLookup.answer;
    const answer = this.holder().then((holder) => {
      if (!holder || holder.owner === this.ownerId) return undefined;
      return holderRenewing(holder, this.clock.now(), settings.ttlMs, settings.renewIntervalMs) ? holder : undefined;
    });
    this.lastLookup = { at: now, answer };
    // A failed read is not kept: the next caller asks the store again.
    answer.catch(() => {
      if (this.lastLookup?.answer === answer) this.lastLookup = undefined;
    });
    return answer;
  }

  start(): void {
    this.leadership.start();
  }

  stop(): Promise<void> {
    return this.leadership.stop();
  }
}
