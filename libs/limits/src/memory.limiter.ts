import type { Clock, KeyLimits } from '@llmgw/domain';
import { MINUTE_MS, msToNextUtcDay, utcDay, type AdmitRequest, type AdmitResult, type LimitName, type Limiter, type RateState, type Ticket } from './limiter.port';

interface Held {
  readonly id: string;
  readonly at: number;
  amount: number;
}

/**
 * Entries of a window, oldest first: pushed at the end, dropped from the front in O(1) (an
 * array's shift() copies the rest once it is large: 150 µs at 300,000 entries, a minute of a busy
 * key), compacted when the dropped front outgrows what is left.
 */
class Window<T> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  /** The i-th oldest (0: the oldest). */
  at(i: number): T {
    return this.items[this.head + i];
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T {
    const held = this.items[this.head++];
    if (this.head >= 1_024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return held;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let i = this.head; i < this.items.length; i++) yield this.items[i];
  }
}

interface KeyState {
  /** When each request of the last minute was admitted, oldest first (numbers: nothing for the GC to trace). */
  requests: Window<number>;
  /** Token reservations of the last minute, oldest first, and their sum. */
  tokens: Window<Held>;
  /** The same reservations by request id, so a settle finds its own without a scan. */
  tokenById: Map<string, Held>;
  tokenSum: number;
  /** Concurrency leases: request id → lease end. Lapsed ones are dropped when they could matter (see lapse). */
  leases: Map<string, number>;
  /** When lapsed leases were last dropped. */
  lapsedAt: number;
  /** Tokens per UTC day; days before yesterday are dropped when the day changes. */
  days: Map<string, number>;
  today: string;
}

export interface MemoryLimiterOptions {
  readonly clock: Clock;
  /** How long a concurrency claim lasts without renewal (ms). */
  readonly leaseMs: number;
  /** The rate window (default one minute; tests shorten it). */
  readonly windowMs?: number;
}

/**
 * The limits of one router on its own, exact, in memory: sliding one-minute windows for requests
 * and tokens, leases for concurrency, a counter per UTC day. The same rules as the Redis
 * limiter's scripts (redis.limiter.ts), so a router without Redis enforces the numbers exactly,
 * and a router that lost Redis enforces its share of them.
 */
export class MemoryLimiter implements Limiter {
  private readonly keys = new Map<string, KeyState>();
  private readonly window: number;

  constructor(private readonly options: MemoryLimiterOptions) {
    this.window = options.windowMs ?? MINUTE_MS;
  }

  async admit(request: AdmitRequest): Promise<AdmitResult> {
    return this.admitNow(request);
  }

  /** Always decides at once: everything it needs is in this process. */
  admitNow(request: AdmitRequest): AdmitResult {
    const now = this.options.clock.now();
    const { limits, reserveTokens: reserve } = request;
    const s = this.state(request.key, now);
    const refuse = (refusedBy: LimitName, retryAfterMs: number): AdmitResult => ({
      admitted: false,
      refusedBy,
      retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)),
      ...this.rates(s, limits, now),
    });

    const rpm = limits.requestsPerMinute;
    if (rpm !== undefined && s.requests.length >= rpm) return refuse('requests', s.requests.at(s.requests.length - rpm) + this.window - now);
    const tpm = limits.tokensPerMinute;
    if (tpm !== undefined && s.tokenSum + reserve > tpm) return refuse('tokens', tokensFreeAt(s, tpm, reserve, this.window) - now);
    const conc = limits.concurrentRequests;
    if (conc !== undefined && s.leases.size >= conc && this.lapse(s, now).size >= conc) return refuse('concurrency', 1_000);
    const day = s.today;
    const perDay = limits.tokensPerDay;
    if (perDay !== undefined && (s.days.get(day) ?? 0) + reserve > perDay) return refuse('daily-tokens', msToNextUtcDay(now));

    if (rpm !== undefined) s.requests.push(now);
    if (tpm !== undefined) {
      const held: Held = { id: request.requestId, at: now, amount: reserve };
      s.tokens.push(held);
      s.tokenById.set(held.id, held);
      s.tokenSum += reserve;
    }
    if (conc !== undefined) s.leases.set(request.requestId, now + this.options.leaseMs);
    if (perDay !== undefined) s.days.set(day, (s.days.get(day) ?? 0) + reserve);
    const ticket: Ticket = { key: request.key, requestId: request.requestId, limits, reserved: reserve, day, via: 'memory' };
    const { requests, tokens } = this.rates(s, limits, now);
    return { admitted: true, ticket, requests, tokens };
  }

  settle(ticket: Ticket, usedTokens: number): undefined {
    const s = this.keys.get(ticket.key);
    if (s === undefined) return;
    const held = s.tokenById.get(ticket.requestId);
    if (held !== undefined) {
      s.tokenSum += usedTokens - held.amount;
      held.amount = usedTokens;
    }
    if (ticket.limits.tokensPerDay !== undefined && s.days.has(ticket.day)) s.days.set(ticket.day, (s.days.get(ticket.day) ?? 0) + usedTokens - ticket.reserved);
    s.leases.delete(ticket.requestId);
  }

  async renew(tickets: readonly Ticket[]): Promise<void> {
    const until = this.options.clock.now() + this.options.leaseMs;
    for (const t of tickets) {
      const leases = this.keys.get(t.key)?.leases;
      // As Redis's renewal (ZADD XX): a claim not dropped yet is kept, even one renewed late; the
      // request is still in flight, so counting it errs on the side of the limit.
      if (leases?.has(t.requestId)) leases.set(t.requestId, until);
    }
  }

  /** The key's state with everything that expired by `now` dropped. */
  private state(key: string, now: number): KeyState {
    let s = this.keys.get(key);
    if (s === undefined) {
      s = { requests: new Window(), tokens: new Window(), tokenById: new Map(), tokenSum: 0, leases: new Map(), lapsedAt: now, days: new Map(), today: utcDay(now) };
      this.keys.set(key, s);
    }
    const cutoff = now - this.window;
    while (s.requests.length > 0 && s.requests.at(0) <= cutoff) s.requests.shift();
    while (s.tokens.length > 0 && s.tokens.at(0).at <= cutoff) {
      const gone = s.tokens.shift();
      s.tokenById.delete(gone.id);
      s.tokenSum -= gone.amount;
    }
    // A lease period's lapsed claims go at most once per period (and whenever the limit is reached), not on every admission.
    if (now - s.lapsedAt >= this.options.leaseMs) this.lapse(s, now);
    const today = utcDay(now);
    if (today !== s.today) {
      const yesterday = utcDay(now - 86_400_000);
      for (const day of s.days.keys()) if (day !== today && day !== yesterday) s.days.delete(day);
      s.today = today;
    }
    return s;
  }

  /** Drops the key's lapsed concurrency claims (their routers' requests never settled); returns what is left. */
  private lapse(s: KeyState, now: number): Map<string, number> {
    for (const [id, end] of s.leases) if (end <= now) s.leases.delete(id);
    s.lapsedAt = now;
    return s.leases;
  }

  private rates(s: KeyState, limits: KeyLimits, now: number): { requests: RateState | undefined; tokens: RateState | undefined } {
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    return {
      requests: rpm === undefined ? undefined : { limit: rpm, remaining: rpm - s.requests.length, resetMs: s.requests.length === 0 ? 0 : s.requests.at(0) + this.window - now },
      tokens: tpm === undefined ? undefined : { limit: tpm, remaining: tpm - s.tokenSum, resetMs: s.tokens.length === 0 ? 0 : s.tokens.at(0).at + this.window - now },
    };
  }
}

/** When enough of the window's tokens will have expired for `reserve` more to fit under `tpm`. */
function tokensFreeAt(s: KeyState, tpm: number, reserve: number, window: number): number {
  if (reserve > tpm) return s.tokens.length === 0 ? window : s.tokens.at(s.tokens.length - 1).at + window;
  let left = s.tokenSum;
  for (const held of s.tokens) {
    left -= held.amount;
    if (left + reserve <= tpm) return held.at + window;
  }
  return s.tokens.length === 0 ? 0 : s.tokens.at(s.tokens.length - 1).at + window;
}
