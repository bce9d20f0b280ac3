import type { Clock } from '@llmgw/domain';
import type Redis from 'ioredis';
import { MINUTE_MS, msToNextUtcDay, utcDay, type AdmitRequest, type AdmitResult, type LimitName, type Limiter, type Ticket } from './limiter.port';

// KEYS: 1 requests zset (score: admitted at), 2 tokens zset (score: admitted at; member
// `<id>:<tokens>`, so expiring an entry needs no second structure), 3 tokens sum, 4 concurrency
// zset (score: lease end), 5 the day's tokens.
// ARGV: id, window ms, requests/min, tokens/min, reserve, concurrent, lease ms, tokens/day,
// day ttl s; a limit of -1 is no limit. Time is the server's, so routers with skewed clocks agree.
// Every check runs before anything is recorded: a refused request holds nothing. Only the
// structures of limits the key has are touched.
const ADMIT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, window = ARGV[1], tonumber(ARGV[2])
local rpm, tpm, reserve = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local conc, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local perDay, dayTtl = tonumber(ARGV[8]), tonumber(ARGV[9])
local cutoff = now - window
local function amount(member) return tonumber(string.match(member, ':(%d+)$')) or 0 end
local reqCount, tokSum, concCount, dayUsed = 0, 0, 0, 0
if rpm >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cutoff)
  reqCount = redis.call('ZCARD', KEYS[1])
end
if tpm >= 0 then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff)
  if #expired > 0 then
    local gone = 0
    for i = 1, #expired do gone = gone + amount(expired[i]) end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', cutoff)
    tokSum = redis.call('DECRBY', KEYS[3], gone)
  else
    tokSum = tonumber(redis.call('GET', KEYS[3]) or '0')
  end
end
if conc >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  concCount = redis.call('ZCARD', KEYS[4])
end
if perDay >= 0 then dayUsed = tonumber(redis.call('GET', KEYS[5]) or '0') end
local refused, retry = 0, 0
if rpm >= 0 and reqCount >= rpm then
  refused = 1
  local nth = redis.call('ZRANGE', KEYS[1], reqCount - rpm, reqCount - rpm, 'WITHSCORES')
  retry = tonumber(nth[2]) + window - now
elseif tpm >= 0 and tokSum + reserve > tpm then
  refused = 2
  retry = window
  if reserve <= tpm then
    local members = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    local left = tokSum
    for i = 1, #members, 2 do
      left = left - amount(members[i])
      if left + reserve <= tpm then
        retry = tonumber(members[i + 1]) + window - now
        break
      end
    end
  end
elseif conc >= 0 and concCount >= conc then
  refused = 3
  retry = 1000
elseif perDay >= 0 and dayUsed + reserve > perDay then
  refused = 4
end
if refused == 0 then
  if rpm >= 0 then
    redis.call('ZADD', KEYS[1], now, id)
    redis.call('PEXPIRE', KEYS[1], window + 1000)
    reqCount = reqCount + 1
  end
  if tpm >= 0 then
    redis.call('ZADD', KEYS[2], now, id .. ':' .. ARGV[5])
    tokSum = redis.call('INCRBY', KEYS[3], reserve)
    redis.call('PEXPIRE', KEYS[2], window + 1000)
    redis.call('PEXPIRE', KEYS[3], window + 1000)
  end
  if conc >= 0 then
    redis.call('ZADD', KEYS[4], now + lease, id)
    redis.call('PEXPIRE', KEYS[4], lease * 2)
  end
  if perDay >= 0 then
    redis.call('INCRBY', KEYS[5], reserve)
    redis.call('EXPIRE', KEYS[5], dayTtl)
  end
end
local function oldest(key)
  local o = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #o == 0 then return -1 end
  return tonumber(o[2])
end
local reqOldest, tokOldest = -1, -1
if rpm >= 0 then reqOldest = oldest(KEYS[1]) end
if tpm >= 0 then tokOldest = oldest(KEYS[2]) end
return { refused == 0 and 1 or 0, refused, retry, reqCount, reqOldest, tokSum, tokOldest, now }
`;

// KEYS: 1 tokens zset, 2 tokens sum, 3 concurrency zset, 4 the day's tokens.
// ARGV: id, used, reserved, whether the day's budget is kept (1/0). The entry keeps its admission
// time and expiry; only its amount changes (and the sum with it), so settling never extends a key.
const SETTLE_LUA = `
local id, used, reserved = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if used ~= reserved then
  local held = id .. ':' .. ARGV[3]
  local at = redis.call('ZSCORE', KEYS[1], held)
  if at then
    redis.call('ZREM', KEYS[1], held)
    redis.call('ZADD', KEYS[1], at, id .. ':' .. ARGV[2])
    redis.call('INCRBY', KEYS[2], used - reserved)
  end
  if ARGV[4] == '1' and redis.call('EXISTS', KEYS[4]) == 1 then redis.call('INCRBY', KEYS[4], used - reserved) end
end
redis.call('ZREM', KEYS[3], id)
return 1
`;

// KEYS: 1 concurrency zset. ARGV: lease ms, then the request ids whose leases to extend.
const RENEW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1
`;

type Reply = [number, number, number, number, number, number, number, number];

type Args = (string | number)[];

interface ScriptedRedis {
  llmgwAdmit(...args: Args): Promise<Reply>;
  llmgwSettle(...args: Args): Promise<number>;
  llmgwRenew(...args: Args): Promise<number>;
  /** The connection's socket: corked while several calls are written, so they leave as one write. */
  readonly stream?: { cork(): void; uncork(): void };
}

/** A script call waiting for the next write to Redis. */
interface Queued {
  readonly script: 'llmgwAdmit' | 'llmgwSettle';
  readonly args: Args;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** How long a settle may wait for an admission to ride along with (ms), by default. */
export const SETTLE_DELAY_MS = 5;

const REFUSALS: Record<number, LimitName> = { 1: 'requests', 2: 'tokens', 3: 'concurrency', 4: 'daily-tokens' };

export interface RedisLimiterOptions {
  /** A client that fails fast: a command timeout well under a request's budget and no offline queue. */
  readonly redis: Redis;
  /** Prefix of every key this limiter writes (e.g. `llmgw:limits:`); tests isolate by it. */
  readonly prefix: string;
  /** How long a concurrency claim lasts without renewal (ms): what a router that dies can leak. */
  readonly leaseMs: number;
  /** Names the UTC day of the daily budget (the router's clock). */
  readonly clock: Clock;
  /** The rate window (default one minute; tests shorten it). */
  readonly windowMs?: number;
  /** How long a settle may wait to go to Redis in one write with the next admission (ms; default {@link SETTLE_DELAY_MS}). */
  readonly settleDelayMs?: number;
}

/**
 * The limits of a key held exactly across every router, in Redis: one atomic script admits (or
 * refuses) a request against all its key's limits on the server's clock, one settles it. Each
 * key's entries share a hash tag, so a cluster keeps them in one slot. A Redis error or timeout
 * rejects; the caller decides what to do without Redis (SharedLimiter).
 *
 * Round trips: an admission is sent at once, with every settle waiting written ahead of it in the
 * same write (so it sees what they gave back), and Redis answers them together. A settle waits at
 * most `settleDelayMs` for an admission to ride along with, so a finished request's lease and
 * unused tokens are given back that much later at most: never more than the limits allow, a few
 * ms less than they could.
 */
export class RedisLimiter implements Limiter {
  private readonly redis: ScriptedRedis;
  private readonly window: number;
  private readonly settleDelayMs: number;
  private queued: Queued[] = [];
  private settleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: RedisLimiterOptions) {
    this.window = options.windowMs ?? MINUTE_MS;
    this.settleDelayMs = options.settleDelayMs ?? SETTLE_DELAY_MS;
    const r = options.redis;
    if (!('llmgwAdmit' in r)) {
      r.defineCommand('llmgwAdmit', { numberOfKeys: 5, lua: ADMIT_LUA });
      r.defineCommand('llmgwSettle', { numberOfKeys: 4, lua: SETTLE_LUA });
      r.defineCommand('llmgwRenew', { numberOfKeys: 1, lua: RENEW_LUA });
    }
    this.redis = r as unknown as ScriptedRedis;
  }

  async admit(request: AdmitRequest): Promise<AdmitResult> {
    const { limits } = request;
    const day = utcDay(this.options.clock.now());
    const n = (v: number | undefined): number => v ?? -1;
    // Whole tokens: the amount is part of the entry's name, and settle names it again.
    const reserve = Math.max(0, Math.round(request.reserveTokens));
    const [admitted, refused, retry, reqCount, reqOldest, tokSum, tokOldest, now] = await this.send<Reply>('llmgwAdmit', [
      ...this.keys(request.key, day),
      request.requestId,
      this.window,
      n(limits.requestsPerMinute),
      n(limits.tokensPerMinute),
      reserve,
      n(limits.concurrentRequests),
      this.options.leaseMs,
      n(limits.tokensPerDay),
      2 * 86_400,
    ]);
    const reset = (oldest: number): number => (oldest < 0 ? 0 : oldest + this.window - now);
    const rates = {
      ...(limits.requestsPerMinute !== undefined && { requests: { limit: limits.requestsPerMinute, remaining: limits.requestsPerMinute - reqCount, resetMs: reset(reqOldest) } }),
      ...(limits.tokensPerMinute !== undefined && { tokens: { limit: limits.tokensPerMinute, remaining: limits.tokensPerMinute - tokSum, resetMs: reset(tokOldest) } }),
    };
    if (admitted === 1) {
      const ticket: Ticket = { key: request.key, requestId: request.requestId, limits, reserved: reserve, day, via: 'redis' };
      return { admitted: true, ticket, ...rates };
    }
    const refusedBy = REFUSALS[refused];
    const retryAfterMs = refusedBy === 'daily-tokens' ? msToNextUtcDay(now) : retry;
    return { admitted: false, refusedBy, retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)), ...rates };
  }

  async settle(ticket: Ticket, usedTokens: number): Promise<void> {
    const { limits } = ticket;
    const used = Math.max(0, Math.round(usedTokens));
    const tokens = limits.tokensPerMinute !== undefined || limits.tokensPerDay !== undefined;
    // Nothing to give back: no lease held and no reservation that differs from what was used.
    if (limits.concurrentRequests === undefined && (!tokens || used === ticket.reserved)) return;
    const [, tok, sum, conc, day] = this.keys(ticket.key, ticket.day);
    await this.send('llmgwSettle', [tok, sum, conc, day, ticket.requestId, used, ticket.reserved, limits.tokensPerDay !== undefined ? '1' : '0']);
  }

  async renew(tickets: readonly Ticket[]): Promise<void> {
    const byKey = new Map<string, string[]>();
    for (const t of tickets) if (t.limits.concurrentRequests !== undefined) byKey.set(t.key, [...(byKey.get(t.key) ?? []), t.requestId]);
    for (const [key, ids] of byKey) await this.redis.llmgwRenew(this.keys(key, '')[3], this.options.leaseMs, ...ids);
  }

  /**
   * An admission goes to Redis at once, with every settle waiting written ahead of it in the same
   * write; a settle waits at most settleDelayMs for an admission to ride along with.
   */
  private send<T>(script: Queued['script'], args: Args): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: Queued = { script, args, resolve: resolve as (value: unknown) => void, reject };
      if (script === 'llmgwSettle') {
        this.queued.push(call);
        this.settleTimer ??= setTimeout(() => this.flush([]), this.settleDelayMs);
        return;
      }
      this.flush([call]);
    });
  }

  /** Writes the settles waiting and then `after` to Redis as one write (the socket corked while they are sent). */
  private flush(after: Queued[]): void {
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    const batch = this.queued.length === 0 ? after : [...this.queued, ...after];
    this.queued = [];
    const stream = batch.length > 1 ? this.redis.stream : undefined;
    stream?.cork();
    try {
      for (const q of batch) this.redis[q.script](...q.args).then(q.resolve, q.reject);
    } finally {
      stream?.uncork();
    }
  }

  /** The five keys of one API key (and day), sharing a hash tag. */
  private keys(key: string, day: string): string[] {
    const base = `${this.options.prefix}{${key}}`;
    return [`${base}:req`, `${base}:tokens`, `${base}:tokensum`, `${base}:conc`, `${base}:day:${day}`];
  }
}
