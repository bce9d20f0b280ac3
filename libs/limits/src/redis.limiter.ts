import type { Clock } from '@llmgw/domain';
import type Redis from 'ioredis';
import { MINUTE_MS, msToNextUtcDay, utcDay, type AdmitRequest, type AdmitResult, type LimitName, type Limiter, type Ticket } from './limiter.port';

// KEYS: 1 requests zset (score: admitted at), 2 tokens zset (score: admitted at), 3 tokens hash
// (id → tokens), 4 tokens sum, 5 concurrency zset (score: lease end), 6 the day's tokens.
// ARGV: id, window ms, requests/min, tokens/min, reserve, concurrent, lease ms, tokens/day,
// day ttl s; a limit of -1 is no limit. Time is the server's, so routers with skewed clocks agree.
// Every check runs before anything is recorded: a refused request holds nothing.
const ADMIT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, window = ARGV[1], tonumber(ARGV[2])
local rpm, tpm, reserve = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local conc, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local perDay, dayTtl = tonumber(ARGV[8]), tonumber(ARGV[9])
local cutoff = now - window
local function oldest(key)
  local o = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #o == 0 then return -1 end
  return tonumber(o[2])
end
local reqCount, tokSum, concCount, dayUsed = 0, 0, 0, 0
if rpm >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', cutoff)
  reqCount = redis.call('ZCARD', KEYS[1])
end
if tpm >= 0 then
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff)
  if #expired > 0 then
    local gone = 0
    for i = 1, #expired, 500 do
      local chunk = {}
      for j = i, math.min(i + 499, #expired) do chunk[#chunk + 1] = expired[j] end
      local amounts = redis.call('HMGET', KEYS[3], unpack(chunk))
      for k = 1, #chunk do gone = gone + (tonumber(amounts[k]) or 0) end
      redis.call('HDEL', KEYS[3], unpack(chunk))
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', cutoff)
    redis.call('DECRBY', KEYS[4], gone)
  end
  tokSum = tonumber(redis.call('GET', KEYS[4]) or '0')
end
if conc >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  concCount = redis.call('ZCARD', KEYS[5])
end
if perDay >= 0 then dayUsed = tonumber(redis.call('GET', KEYS[6]) or '0') end
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
      left = left - (tonumber(redis.call('HGET', KEYS[3], members[i])) or 0)
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
    redis.call('ZADD', KEYS[2], now, id)
    redis.call('HSET', KEYS[3], id, reserve)
    tokSum = redis.call('INCRBY', KEYS[4], reserve)
    for k = 2, 4 do redis.call('PEXPIRE', KEYS[k], window + 1000) end
  end
  if conc >= 0 then
    redis.call('ZADD', KEYS[5], now + lease, id)
    redis.call('PEXPIRE', KEYS[5], lease * 2)
  end
  if perDay >= 0 then
    redis.call('INCRBY', KEYS[6], reserve)
    redis.call('EXPIRE', KEYS[6], dayTtl)
  end
end
return { refused == 0 and 1 or 0, refused, retry, reqCount, oldest(KEYS[1]), tokSum, oldest(KEYS[2]), now }
`;

// KEYS: 2 tokens zset, 3 tokens hash, 4 tokens sum, 5 concurrency zset, 6 the day's tokens (1 unused).
// ARGV: id, used, reserved, whether the day's budget is kept (1/0), window ms.
const SETTLE_LUA = `
local id, used, reserved = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local old = redis.call('HGET', KEYS[3], id)
if old then
  redis.call('HSET', KEYS[3], id, used)
  redis.call('INCRBY', KEYS[4], used - tonumber(old))
  for k = 2, 4 do redis.call('PEXPIRE', KEYS[k], tonumber(ARGV[5]) + 1000) end
end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[6]) == 1 then redis.call('INCRBY', KEYS[6], used - reserved) end
redis.call('ZREM', KEYS[5], id)
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

interface ScriptedRedis {
  llmgwAdmit(...args: (string | number)[]): Promise<Reply>;
  llmgwSettle(...args: (string | number)[]): Promise<number>;
  llmgwRenew(...args: (string | number)[]): Promise<number>;
}

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
}

/**
 * The limits of a key held exactly across every router, in Redis: one atomic script admits (or
 * refuses) a request against all its key's limits on the server's clock, one settles it. Each
 * key's entries share a hash tag, so a cluster keeps them in one slot. A Redis error or timeout
 * rejects; the caller decides what to do without Redis (SharedLimiter).
 */
export class RedisLimiter implements Limiter {
  private readonly redis: ScriptedRedis;
  private readonly window: number;

  constructor(private readonly options: RedisLimiterOptions) {
    this.window = options.windowMs ?? MINUTE_MS;
    const r = options.redis;
    if (!('llmgwAdmit' in r)) {
      r.defineCommand('llmgwAdmit', { numberOfKeys: 6, lua: ADMIT_LUA });
      r.defineCommand('llmgwSettle', { numberOfKeys: 6, lua: SETTLE_LUA });
      r.defineCommand('llmgwRenew', { numberOfKeys: 1, lua: RENEW_LUA });
    }
    this.redis = r as unknown as ScriptedRedis;
  }

  async admit(request: AdmitRequest): Promise<AdmitResult> {
    const { limits } = request;
    const day = utcDay(this.options.clock.now());
    const n = (v: number | undefined): number => v ?? -1;
    const [admitted, refused, retry, reqCount, reqOldest, tokSum, tokOldest, now] = await this.redis.llmgwAdmit(
      ...this.keys(request.key, day),
      request.requestId,
      this.window,
      n(limits.requestsPerMinute),
      n(limits.tokensPerMinute),
      request.reserveTokens,
      n(limits.concurrentRequests),
      this.options.leaseMs,
      n(limits.tokensPerDay),
      2 * 86_400,
    );
    const reset = (oldest: number): number => (oldest < 0 ? 0 : oldest + this.window - now);
    const rates = {
      ...(limits.requestsPerMinute !== undefined && { requests: { limit: limits.requestsPerMinute, remaining: limits.requestsPerMinute - reqCount, resetMs: reset(reqOldest) } }),
      ...(limits.tokensPerMinute !== undefined && { tokens: { limit: limits.tokensPerMinute, remaining: limits.tokensPerMinute - tokSum, resetMs: reset(tokOldest) } }),
    };
    if (admitted === 1) {
      const ticket: Ticket = { key: request.key, requestId: request.requestId, limits, reserved: request.reserveTokens, day, via: 'redis' };
      return { admitted: true, ticket, ...rates };
    }
    const refusedBy = REFUSALS[refused];
    const retryAfterMs = refusedBy === 'daily-tokens' ? msToNextUtcDay(now) : retry;
    return { admitted: false, refusedBy, retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)), ...rates };
  }

  async settle(ticket: Ticket, usedTokens: number): Promise<void> {
    await this.redis.llmgwSettle(
      ...this.keys(ticket.key, ticket.day),
      ticket.requestId,
      Math.max(0, Math.round(usedTokens)),
      ticket.reserved,
      ticket.limits.tokensPerDay !== undefined ? '1' : '0',
      this.window,
    );
  }

  async renew(tickets: readonly Ticket[]): Promise<void> {
    const byKey = new Map<string, string[]>();
    for (const t of tickets) if (t.limits.concurrentRequests !== undefined) byKey.set(t.key, [...(byKey.get(t.key) ?? []), t.requestId]);
    for (const [key, ids] of byKey) await this.redis.llmgwRenew(this.keys(key, '')[4], this.options.leaseMs, ...ids);
  }

  /** The six keys of one API key (and day), sharing a hash tag. */
  private keys(key: string, day: string): string[] {
    const base = `${this.options.prefix}{${key}}`;
    return [`${base}:req`, `${base}:tok`, `${base}:tokamt`, `${base}:toksum`, `${base}:conc`, `${base}:day:${day}`];
  }
}
