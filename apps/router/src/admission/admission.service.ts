import type { Clock, RoutingPolicyName } from '@llmgw/domain';
import {
  admit,
  chooseByAffinity,
  RecentKeys,
  isSaturated,
  retryAfterSeconds,
  RoundRobin,
  type Candidate,
  type EndpointPicker,
  type PrefixKey,
  type SaturationThresholds,
} from '@llmgw/routing';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { EndpointState, RoutedCandidate } from '../endpoints/endpoint.state';
import { EndpointLease, type ChoiceReason, type LeaseIssuer } from './endpoint.lease';

export type { ChoiceReason } from './endpoint.lease';

/** Admission settings; times in milliseconds. */
export interface AdmissionOptions {
  readonly thresholds: SaturationThresholds;
  /** Requests one model may hold waiting for a free endpoint; past it → 429. */
  readonly queueBound: number;
  /** Longest a request waits in the queue; past it → 429. */
  readonly queueDeadlineMs: number;
  /** Upper bound of the Retry-After answer, seconds. */
  readonly retryAfterMaxSeconds: number;
  /** How often waiting queues are re-checked without an event (breaker cooldowns end silently). */
  readonly pollMs?: number;
}

/** How to choose an endpoint for one request (libs/routing policies). */
export interface RouteHow {
  readonly policy: RoutingPolicyName;
  /** prefix-affinity: the request's prefix key; absent = no prompt to key on (least-load). */
  readonly key?: PrefixKey;
  /** prefix-affinity: the load guard's ε. */
  readonly epsilon?: number;
}

/** Least-load for every request that says nothing else. */
export const LEAST_LOAD: RouteHow = Object.freeze({ policy: 'least-load' });
/** Round-robin, for every request of a round-robin model. */
export const ROUND_ROBIN: RouteHow = Object.freeze({ policy: 'round-robin' });

/** Why a request is refused, with the seconds the client should wait before trying again. */
export interface Refusal {
  readonly kind: 'no_endpoints' | 'queue_full' | 'queue_timeout';
  readonly retryAfterSeconds: number;
  readonly message: string;
}

export type Admission = { readonly ok: true; readonly lease: EndpointLease } | { readonly ok: false; readonly refusal: Refusal };

/** What admission reports for metrics. */
export interface AdmissionHooks {
  queued?(model: string, waitedSeconds: number, outcome: 'admitted' | 'timeout' | 'cancelled' | 'refused'): void;
  refused?(model: string, kind: Refusal['kind']): void;
  chose?(model: string, state: EndpointState, reason: ChoiceReason): void;
}

/** A request waiting in a model's queue. `cancel()` (client gone) drops it without an answer. */
export class Waiter {
  done = false;
  timer: NodeJS.Timeout | undefined;
  resolve!: (admission: Admission) => void;
  readonly promise: Promise<Admission>;

  constructor(
    readonly model: string,
    readonly enqueuedAt: number,
    private readonly onCancel: (w: Waiter) => void,
    readonly how: RouteHow = LEAST_LOAD,
  ) {
    this.promise = new Promise<Admission>((resolve) => (this.resolve = resolve));
  }

  cancel(): void {
    if (this.done) return;
    this.onCancel(this);
  }
}

/** A FIFO of waiters; cancelled ones are skipped lazily. */
class ModelQueue {
  private items: Waiter[] = [];
  private head = 0;
  live = 0;

  push(w: Waiter): void {
    this.items.push(w);
    this.live++;
  }

  /** The oldest waiter still waiting, or undefined. */
  peek(): Waiter | undefined {
    while (this.head < this.items.length && this.items[this.head].done) this.head++;
    if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return this.items[this.head];
  }
}

/**
 * Decides for each request: route now to the best unsaturated endpoint (acquired before it is
 * returned, so nobody else can take the same slot), hold it in the model's bounded queue until
 * an endpoint frees up or its deadline passes, or refuse it (429 queue full/timeout, 503 no
 * endpoint) with a Retry-After estimated from the model's drain rate. New requests never
 * overtake queued ones.
 */
export class AdmissionService implements LeaseIssuer {
  private readonly queues = new Map<string, ModelQueue>();
  private readonly roundRobins = new Map<string, RoundRobin>();
  /** Per model, the prefix keys this router placed lately: one it has not is cold (libs/routing RecentKeys). */
  private readonly recentKeys = new Map<string, RecentKeys>();
  private waiting = 0;
  private poller: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: EndpointRegistry,
    private readonly picker: EndpointPicker,
    private readonly clock: Clock,
    private readonly options: AdmissionOptions,
    private readonly hooks: AdmissionHooks = {},
  ) {
    registry.onSnapshot(() => this.wakeAll());
  }

  /** Admits a request for canonical `model`, chosen as `how` says: a decision now, or a Waiter whose promise decides later. */
  admit(model: string, how: RouteHow = LEAST_LOAD): Admission | Waiter {
    const now = this.clock.now();
    const states = this.registry.endpointsFor(model);
    if (states.length === 0) return this.refuse(model, 'no_endpoints', `no endpoint serves model '${model}' right now`);
    const queue = this.queues.get(model);
    if (queue !== undefined && queue.live > 0) {
      // Never overtake a queued request; but if room has appeared, the queue moves now.
      const queued = this.enqueue(model, queue, now, how);
      this.wake(model);
      return queued;
    }
    const pick = this.pick(model, now, how, 0, undefined);
    if (pick instanceof EndpointLease) return { ok: true, lease: pick };
    if (pick === 'saturated') {
      if (this.options.queueBound > 0) return this.enqueue(model, queue, now, how);
      return this.refuse(model, 'queue_full', `every endpoint for model '${model}' is saturated and queueing is off`);
    }
    return this.refuse(model, 'no_endpoints', `no available endpoint for model '${model}' (all are failing or draining)`);
  }

  /**
   * A lease for a retry: an eligible endpoint not yet tried by this request, unsaturated if any
   * is. Undefined when none is left. Retries never queue.
   */
  retry(model: string, tried: ReadonlySet<EndpointState>): EndpointLease | undefined {
    const pick = this.pick(model, this.clock.now(), LEAST_LOAD, 0, tried);
    return pick instanceof EndpointLease ? pick : undefined;
  }

  /** The endpoint of a retry's lease (see `retry`), acquired; undefined when none is left. */
  pickForRetry(model: string, tried: ReadonlySet<EndpointState>): EndpointState | undefined {
    return this.retry(model, tried)?.state;
  }

  /** The admission clock, for leases. */
  now(): number {
    return this.clock.now();
  }

  /** An endpoint of `model` finished a request (or changed load): queued requests may proceed. */
  wake(model: string): void {
    if (this.waiting === 0) return;
    const queue = this.queues.get(model);
    if (queue === undefined || queue.live === 0) return;
    const now = this.clock.now();
    for (let w = queue.peek(); w !== undefined; w = queue.peek()) {
      const pick = this.pick(model, now, w.how, now - w.enqueuedAt, undefined);
      if (pick === 'saturated') return;
      if (pick === 'none') {
        const refusal = this.refusal(model, 'no_endpoints', `no available endpoint for model '${model}' (all are failing, draining or gone)`);
        this.settle(queue, w, { ok: false, refusal }, 'refused');
        continue;
      }
      this.settle(queue, w, { ok: true, lease: pick }, 'admitted');
    }
  }

  /** Re-checks every queue (after a snapshot, and on the poll tick). */
  wakeAll(): void {
    if (this.waiting === 0) return;
    for (const model of [...this.queues.keys()]) this.wake(model);
  }

  /** Requests waiting per model (models with none are absent). */
  depths(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [model, q] of this.queues) if (q.live > 0) out.set(model, q.live);
    return out;
  }

  /** Sum of the measured drain rates of `model`'s endpoints (completions/s); undefined when none is known. */
  drainRate(model: string): number | undefined {
    let sum: number | undefined;
    for (const s of this.registry.endpointsFor(model)) {
      const r = s.drain.rate();
      if (r !== undefined) sum = (sum ?? 0) + r;
    }
    return sum;
  }

  /** Refuses every waiter (shutdown) and stops the poll timer. */
  close(): void {
    for (const [model, q] of this.queues) {
      for (let w = q.peek(); w !== undefined; w = q.peek()) {
        this.settle(q, w, { ok: false, refusal: this.refusal(model, 'no_endpoints', 'the router is shutting down') }, 'refused');
      }
    }
    this.stopPolling();
  }

  /**
   * The one place the picker runs: `model`'s endpoints (less those `tried`) → its filters →
   * the saturation check → a choice among the unsaturated ones, leased. All saturated: 'saturated'
   * — or, for a retry (`tried` given), a choice among them all, since retries never queue.
   * Nothing eligible: 'none'.
   */
  private pick(model: string, now: number, how: RouteHow, queuedMs: number, tried: ReadonlySet<EndpointState> | undefined): EndpointLease | 'saturated' | 'none' {
    const candidates: RoutedCandidate[] = [];
    for (const s of this.registry.endpointsFor(model)) if (tried === undefined || !tried.has(s)) candidates.push(s.candidate(now));
    const eligible = this.picker.eligible({ model }, candidates);
    const decision = admit(eligible, this.options.thresholds, 0, 1);
    if (decision.action === 'route') return this.choose(model, decision.candidates, how, eligible, queuedMs);
    if (decision.action === 'reject') return 'none';
    return tried === undefined ? 'saturated' : this.choose(model, eligible, how, eligible, queuedMs);
  }

  /**
   * Picks among non-empty `candidates` as `how` says and leases the endpoint: prefix affinity
   * with its load guard (libs/routing chooseByAffinity), round-robin, or the weighted scorers
   * (least-load, and prefix-affinity's fallback when there is no key or every replica is saturated).
   * Prefix affinity orders `eligible` (saturated replicas included, so a prefix's home keeps its
   * rank and a saturated one shows as passed over); its guard skips the saturated ones.
   */
  private choose(model: string, candidates: readonly Candidate[], how: RouteHow, eligible: readonly Candidate[], queuedMs: number): EndpointLease {
    let chosen: RoutedCandidate | undefined;
    let reason: ChoiceReason | undefined;
    if (how.policy === 'prefix-affinity' && how.key !== undefined) {
      const thresholds = this.options.thresholds;
      let recent = this.recentKeys.get(model);
      if (recent === undefined) this.recentKeys.set(model, (recent = new RecentKeys()));
      const cold = recent.placed(how.key.hash) ? undefined : (underBoth: readonly RoutedCandidate[]) => this.byLoad(underBoth, 'first');
      const a = chooseByAffinity(how.key.hash, eligible as readonly RoutedCandidate[], how.epsilon ?? 0, (c) => isSaturated(c, thresholds), cold);
      if (a !== undefined) {
        chosen = a.chosen;
        reason = {
          policy: 'prefix-affinity',
          rank: a.rank,
          deflectedFrom: a.deflectedFrom,
          cap: a.cap,
          averageCap: a.averageCap,
          blocks: how.key.blocks,
          ...(a.busier !== undefined && { busier: a.busier }),
          ...(a.cold && { cold: true }),
        };
      } else {
        reason = { policy: 'least-load', fallback: 'all-saturated' };
      }
    } else if (how.policy === 'round-robin') {
      let rr = this.roundRobins.get(model);
      if (rr === undefined) this.roundRobins.set(model, (rr = new RoundRobin()));
      chosen = rr.choose(candidates as readonly RoutedCandidate[]);
      reason = { policy: 'round-robin' };
    } else if (how.policy === 'prefix-affinity') {
      reason = { policy: 'least-load', fallback: 'no-prefix' };
    }
    if (chosen === undefined && candidates.length === 1) {
      chosen = candidates[0] as RoutedCandidate;
      reason ??= { policy: 'only-candidate' };
    } else if (chosen === undefined) {
      chosen = this.byLoad(candidates as readonly RoutedCandidate[]);
      reason ??= { policy: 'least-load' };
    }
    const lease = new EndpointLease(this, chosen.state, reason as ChoiceReason, queuedMs);
    this.hooks.chose?.(model, chosen.state, lease.reason);
    return lease;
  }

  /** The weighted scorers' choice among non-empty `candidates` (least-load; ties as EndpointPicker.choose says), its scores kept for /metrics. */
  private byLoad(candidates: readonly RoutedCandidate[], ties: 'random' | 'first' = 'random'): RoutedCandidate {
    const result = this.picker.choose(candidates, ties);
    if (!result.ok) throw new Error('picker refused a non-empty candidate list');
    const chosen = result.chosen as RoutedCandidate;
    chosen.state.lastScores = result.scores[result.eligible.indexOf(chosen)].byScorer;
    return chosen;
  }

  private enqueue(model: string, existing: ModelQueue | undefined, now: number, how: RouteHow): Admission | Waiter {
    const queue = existing ?? this.queueFor(model);
    if (queue.live >= this.options.queueBound) {
      return this.refuse(model, 'queue_full', `too many requests waiting for model '${model}' (${queue.live} queued)`);
    }
    const waiter = new Waiter(model, now, (w) => this.settle(queue, w, undefined, 'cancelled'), how);
    waiter.timer = setTimeout(() => {
      const refusal = this.refusal(model, 'queue_timeout', `no endpoint for model '${model}' became free within ${this.options.queueDeadlineMs} ms`);
      this.settle(queue, waiter, { ok: false, refusal }, 'timeout');
    }, this.options.queueDeadlineMs);
    queue.push(waiter);
    this.waiting++;
    this.startPolling();
    return waiter;
  }

  private settle(queue: ModelQueue, w: Waiter, admission: Admission | undefined, outcome: 'admitted' | 'timeout' | 'cancelled' | 'refused'): void {
    if (w.done) return;
    w.done = true;
    clearTimeout(w.timer);
    queue.live--;
    this.waiting--;
    if (this.waiting === 0) this.stopPolling();
    this.hooks.queued?.(w.model, (this.clock.now() - w.enqueuedAt) / 1000, outcome);
    if (admission !== undefined && !admission.ok) this.hooks.refused?.(w.model, admission.refusal.kind);
    if (admission !== undefined) w.resolve(admission);
  }

  private queueFor(model: string): ModelQueue {
    let q = this.queues.get(model);
    if (q === undefined) this.queues.set(model, (q = new ModelQueue()));
    return q;
  }

  private refuse(model: string, kind: Refusal['kind'], message: string): Admission {
    this.hooks.refused?.(model, kind);
    return { ok: false, refusal: this.refusal(model, kind, message) };
  }

  private refusal(model: string, kind: Refusal['kind'], message: string): Refusal {
    const ahead = this.queues.get(model)?.live ?? 0;
    return { kind, message, retryAfterSeconds: retryAfterSeconds(ahead, this.drainRate(model), 1, this.options.retryAfterMaxSeconds) };
  }

  private startPolling(): void {
    if (this.poller !== undefined) return;
    this.poller = setInterval(() => this.wakeAll(), this.options.pollMs ?? 100);
    this.poller.unref();
  }

  private stopPolling(): void {
    if (this.poller === undefined) return;
    clearInterval(this.poller);
    this.poller = undefined;
  }
}
