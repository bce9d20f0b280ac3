import { DomainError, ErrorCode, type Clock, type Problem, type Rng, type Scheduler } from '@llmgw/domain';
import type { Leadership, LeadershipCallbacks, LeadershipEnd, LeadershipEndReason, LeadershipTerm } from './leadership.port';
import type { Fence, LeaseStore } from './lease-store.port';

/** Lease name the controllers share unless configured otherwise. */
export const DEFAULT_LEASE_NAME = 'controller';
export const DEFAULT_LEASE_TTL_MS = 15_000;
export const DEFAULT_LEASE_RENEW_INTERVAL_MS = 5_000;
export const DEFAULT_LEASE_MAX_CLOCK_SKEW_MS = 1_000;

/** Options for {@link LeaderElector}. All durations are milliseconds. */
export interface LeaderElectorOptions extends LeadershipCallbacks {
  readonly store: LeaseStore;
  readonly clock: Clock;
  /** Source of the owner id (drawn once per elector, i.e. per process start). */
  readonly rng: Rng;
  /** Needed by start(); tests may instead call tick() themselves. */
  readonly scheduler?: Scheduler;
  readonly name?: string;
  /** How long one successful claim lasts in the store (default 15000). */
  readonly ttlMs?: number;
  /** Time between claim attempts, leading or not (default 5000); must be below ttlMs - maxClockSkewMs. */
  readonly renewIntervalMs?: number;
  /** Largest difference between two controllers' clocks this install tolerates (default 1000). */
  readonly maxClockSkewMs?: number;
}

/** 32 lowercase hex characters drawn from `rng`: the owner id of one process start. */
export function randomOwnerId(rng: Rng): string {
  let id = '';
  for (let i = 0; i < 4; i++) {
    const word = Math.floor(rng.next() * 0x1_0000_0000);
    id += word.toString(16).padStart(8, '0');
  }
  return id;
}

interface Term {
  readonly generation: number;
  readonly startedAt: number;
  /** The claim is acted on while clock < validUntil = (clock before the last successful claim) + ttl - skew. */
  validUntil: number;
}

/**
 * Leader election over a lease row. Contract (README "How long a claim is kept"):
 * - every attempt reads the clock as t0, then runs the store's single claim statement with now = t0;
 * - after a successful claim this process leads until t0 + ttlMs - maxClockSkewMs, renewed or not;
 *   a failing store keeps the claim exactly that long, then the term ends with reason `expired`;
 * - another process can take the lease only once its clock passes t0 + ttlMs, so terms of two
 *   processes never overlap while their clocks differ by less than maxClockSkewMs.
 */
export class LeaderElector implements Leadership {
  readonly ownerId: string;
  readonly name: string;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly maxClockSkewMs: number;

  private term: Term | undefined;
  private inFlight: Promise<void> | undefined;
  private started = false;
  private stopped = false;
  private cancelTick: (() => void) | undefined;
  private cancelLapse: (() => void) | undefined;

  constructor(private readonly options: LeaderElectorOptions) {
    this.name = options.name ?? DEFAULT_LEASE_NAME;
    this.ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    this.renewIntervalMs = options.renewIntervalMs ?? DEFAULT_LEASE_RENEW_INTERVAL_MS;
    this.maxClockSkewMs = options.maxClockSkewMs ?? DEFAULT_LEASE_MAX_CLOCK_SKEW_MS;
    const problems = validateTimings(this.name, this.ttlMs, this.renewIntervalMs, this.maxClockSkewMs);
    if (problems.length > 0) {
      throw new DomainError(ErrorCode.InvalidArgument, `invalid lease settings: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, problems);
    }
    this.ownerId = randomOwnerId(options.rng);
  }

  isLeader(): boolean {
    return this.term !== undefined && this.options.clock.now() < this.term.validUntil;
  }

  get generation(): number | undefined {
    return this.isLeader() ? this.term?.generation : undefined;
  }

  /** Clock time the current claim is kept until without another successful renewal; undefined when not leading. */
  validUntil(): number | undefined {
    return this.isLeader() ? this.term?.validUntil : undefined;
  }

  fence(): Fence {
    const term = this.term;
    if (term === undefined || !this.isLeader()) {
      throw new DomainError(ErrorCode.Fenced, `not leading lease '${this.name}' (owner ${this.ownerId})`);
    }
    return { kind: 'lease', lease: this.name, owner: this.ownerId, generation: term.generation };
  }

  start(): void {
    if (this.started) return;
    if (this.options.scheduler === undefined) {
      throw new DomainError(ErrorCode.InvalidArgument, 'LeaderElector.start() needs a scheduler; pass one or call tick() yourself');
    }
    this.started = true;
    this.loop();
  }

  /**
   * One claim attempt (acquire or renew: the same statement). Concurrent calls share the
   * attempt in flight. Resolves once the state reflects the answer; never rejects.
   */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.inFlight === undefined) {
      this.inFlight = this.attempt().finally(() => {
        this.inFlight = undefined;
      });
    }
    return this.inFlight;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.cancelTick?.();
    this.cancelLapse?.();
    if (this.inFlight !== undefined) await this.inFlight;
    this.endTerm('stopped', this.options.clock.now());
    // Released even when no term is open: a claim that succeeded while stop() waited is ours too.
    try {
      await this.options.store.release(this.name, this.ownerId);
    } catch (error) {
      this.report(error);
    }
  }

  private async attempt(): Promise<void> {
    const { clock, store } = this.options;
    const t0 = clock.now();
    this.expireIfLapsed(t0);
    let record;
    try {
      record = await store.claim(this.name, this.ownerId, t0, this.ttlMs);
    } catch (error) {
      // An unreachable store is no evidence that somebody else leads: keep the claim until it lapses.
      this.expireIfLapsed(clock.now());
      this.report(error);
      return;
    }
    if (this.stopped) return;
    const t1 = clock.now();
    this.expireIfLapsed(t1);
    if (record === undefined || record.owner !== this.ownerId) {
      this.endTerm('lost', t1);
      return;
    }
    const validUntil = t0 + this.ttlMs - this.maxClockSkewMs;
    if (this.term !== undefined && this.term.generation !== record.generation) {
      // The lease changed hands between two of our claims: what we held is gone.
      this.endTerm('lost', t1);
    }
    if (validUntil <= t1) return; // the answer came too late to act on; the next attempt retries
    if (this.term === undefined) {
      this.term = { generation: record.generation, startedAt: t1, validUntil };
      const term: LeadershipTerm = { ownerId: this.ownerId, generation: record.generation, startedAt: t1 };
      this.call(() => this.options.onStartedLeading?.(term));
    } else {
      this.term.validUntil = validUntil;
    }
    this.armLapse();
  }

  private expireIfLapsed(now: number): void {
    if (this.term !== undefined && now >= this.term.validUntil) this.endTerm('expired', this.term.validUntil);
  }

  private endTerm(reason: LeadershipEndReason, at: number): void {
    const term = this.term;
    if (term === undefined) return;
    this.term = undefined;
    this.cancelLapse?.();
    this.cancelLapse = undefined;
    const end: LeadershipEnd = { ownerId: this.ownerId, generation: term.generation, reason, at };
    this.call(() => this.options.onStoppedLeading?.(end));
  }

  /** Wakes up when the kept claim ends, so leadership is given up on time even while a claim hangs. */
  private armLapse(): void {
    const { scheduler, clock } = this.options;
    if (!this.started || scheduler === undefined || this.term === undefined) return;
    this.cancelLapse?.();
    this.cancelLapse = scheduler.schedule(this.term.validUntil - clock.now(), () => {
      this.cancelLapse = undefined;
      this.expireIfLapsed(clock.now());
    });
  }

  private loop(): void {
    const { scheduler, clock } = this.options;
    if (this.stopped || scheduler === undefined) return;
    const began = clock.now();
    void this.tick().then(() => {
      if (this.stopped) return;
      const delay = Math.max(0, this.renewIntervalMs - (clock.now() - began));
      this.cancelTick = scheduler.schedule(delay, () => this.loop());
    });
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.report(error);
    }
  }

  private report(error: unknown): void {
    try {
      this.options.onError?.(error);
    } catch {
      // an error hook that throws has nowhere left to report to
    }
  }
}

function validateTimings(name: string, ttlMs: number, renewIntervalMs: number, maxClockSkewMs: number): Problem[] {
  const problems: Problem[] = [];
  if (name.length === 0) problems.push({ path: 'name', message: 'must not be empty' });
  if (!Number.isInteger(ttlMs) || ttlMs <= 0) problems.push({ path: 'ttlMs', message: `must be a positive integer, got ${ttlMs}` });
  if (!Number.isInteger(renewIntervalMs) || renewIntervalMs <= 0) {
    problems.push({ path: 'renewIntervalMs', message: `must be a positive integer, got ${renewIntervalMs}` });
  }
  if (!Number.isInteger(maxClockSkewMs) || maxClockSkewMs < 0) {
    problems.push({ path: 'maxClockSkewMs', message: `must be a non-negative integer, got ${maxClockSkewMs}` });
  }
  if (problems.length === 0 && renewIntervalMs >= ttlMs - maxClockSkewMs) {
    problems.push({
      path: 'renewIntervalMs',
      message: `must be below ttlMs - maxClockSkewMs (${ttlMs} - ${maxClockSkewMs}), got ${renewIntervalMs}: the claim would lapse between renewals`,
    });
  }
  return problems;
}
