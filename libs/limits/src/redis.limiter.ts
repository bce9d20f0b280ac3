import { monotonicClock, timerScheduler, type Clock, type KeyLimits, type Scheduler } from '@llmgw/domain';
import type Redis from 'ioredis';
import { MINUTE_MS, msToNextUtcDay, utcDay, type AdmitRequest, type AdmitResult, type LimitName, type Limiter, type RateState, type Ticket } from './limiter.port';

/** The longest a batch of permits may last (ms): keys are kept this much longer than the window, for entries dated at a batch's end. */
export const MAX_BATCH_MS = 5_000;

// KEYS: 1 requests zset (score: admitted at), 2 tokens zset (score: admitted at; member
// `<id>:<tokens>`, so expiring an entry needs no second structure), 3 tokens sum, 4 concurrency
// zset (score: lease end), 5 the day's tokens.
// ARGV: id, window ms, requests/min, tokens/min, reserve, concurrent, lease ms, tokens/day,
// day ttl s, then the batch of permits asked for with it (see RedisLimiter): batch id, permits (0: none),
// tokens, ms, routers. A limit of -1 is no limit. Time is the server's, so routers with skewed
// clocks agree. Every check runs before anything is recorded: a refused request holds nothing.
// Only the structures of limits the key has are touched.
// A batch is granted only with an admitted request, and only where the key's remaining budget
// leaves room for one like it for every router. Its request and token entries are dated at the
// batch's end (now + ms), the latest any of its permits can be used, so they stay in every
// window a use of theirs falls in. Keys live the window plus MAX_BATCH_MS plus a second.
const ADMIT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, window = ARGV[1], tonumber(ARGV[2])
local rpm, tpm, reserve = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local conc, lease = tonumber(ARGV[6]), tonumber(ARGV[7])
local perDay, dayTtl = tonumber(ARGV[8]), tonumber(ARGV[9])
local bid, batchN, batchTok, batchMs, routers = ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local keep = window + ${MAX_BATCH_MS} + 1000
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
local batched = 0
if refused == 0 then
  if batchN > 0
    and (rpm < 0 or reqCount + 1 + routers * batchN <= rpm)
    and (tpm < 0 or tokSum + reserve + routers * batchTok <= tpm)
    and (conc < 0 or concCount + 1 + routers * batchN <= conc)
    and (perDay < 0 or dayUsed + reserve + routers * batchTok <= perDay) then
    batched = 1
  end
  local ends = now + batchMs
  if rpm >= 0 then
    redis.call('ZADD', KEYS[1], now, id)
    reqCount = reqCount + 1
    if batched == 1 then
      local entries = {}
      for i = 1, batchN do entries[2 * i - 1] = ends; entries[2 * i] = bid .. '#' .. i end
      redis.call('ZADD', KEYS[1], unpack(entries))
      reqCount = reqCount + batchN
    end
    redis.call('PEXPIRE', KEYS[1], keep)
  end
  if tpm >= 0 then
    redis.call('ZADD', KEYS[2], now, id .. ':' .. ARGV[5])
    tokSum = redis.call('INCRBY', KEYS[3], reserve)
    if batched == 1 then
      redis.call('ZADD', KEYS[2], ends, bid .. ':' .. ARGV[12])
      tokSum = redis.call('INCRBY', KEYS[3], batchTok)
    end
    redis.call('PEXPIRE', KEYS[2], keep)
    redis.call('PEXPIRE', KEYS[3], keep)
  end
  if conc >= 0 then
    redis.call('ZADD', KEYS[4], now + lease, id)
    if batched == 1 then
      local slots = {}
      for i = 1, batchN do slots[2 * i - 1] = now + lease; slots[2 * i] = bid .. '#c' .. i end
      redis.call('ZADD', KEYS[4], unpack(slots))
    end
    redis.call('PEXPIRE', KEYS[4], lease * 2)
  end
  if perDay >= 0 then
    redis.call('INCRBY', KEYS[5], reserve + batched * batchTok)
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
return { refused == 0 and 1 or 0, refused, retry, reqCount, reqOldest, tokSum, tokOldest, now, batched }
`;

// KEYS: as ADMIT_LUA's. ARGV: entry id (a request's, or a batch's), the tokens its entry holds, the
// tokens it keeps, whether the day's budget is kept (1/0), a probe (which window holds the entry
// named next: r(equests), c(oncurrency), t(okens); '' for none) and that entry, how many request
// entries to remove, those entries, then the concurrency entries to remove. With a probe, nothing
// changes unless the entry is there: an admission whose answer never came is withdrawn only if it
// ran. A token entry keeps its time and expiry;
// only its amount changes (and the sum with it), so a release never extends a key. What already
// left the window is not touched.
const RELEASE_LUA = `
local id, held, kept = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local probe = ARGV[5]
if probe ~= '' then
  local where = KEYS[2]
  if probe == 'r' then where = KEYS[1] elseif probe == 'c' then where = KEYS[4] end
  if not redis.call('ZSCORE', where, ARGV[6]) then return 0 end
end
if kept ~= held then
  local name = id .. ':' .. ARGV[2]
  local at = redis.call('ZSCORE', KEYS[2], name)
  if at then
    redis.call('ZREM', KEYS[2], name)
    redis.call('ZADD', KEYS[2], at, id .. ':' .. ARGV[3])
    redis.call('INCRBY', KEYS[3], kept - held)
  end
  if ARGV[4] == '1' and redis.call('EXISTS', KEYS[5]) == 1 then redis.call('INCRBY', KEYS[5], kept - held) end
end
local n = tonumber(ARGV[7])
if n > 0 then redis.call('ZREM', KEYS[1], unpack(ARGV, 8, 7 + n)) end
if #ARGV > 7 + n then redis.call('ZREM', KEYS[4], unpack(ARGV, 8 + n, #ARGV)) end
return 1
`;

// KEYS: 1 concurrency zset. ARGV: lease ms, then the entries whose leases to extend.
const RENEW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1
`;

type Reply = [number, number, number, number, number, number, number, number, number];

type Args = (string | number)[];

/** Which window holds the entry that tells whether an admission ran (RELEASE_LUA), and that entry. */
type Probe = readonly ['r' | 'c' | 't', string];

interface ScriptedRedis {
  llmgwAdmit(...args: Args): Promise<Reply>;
  llmgwRelease(...args: Args): Promise<number>;
  llmgwRenew(...args: Args): Promise<number>;
  /** The connection's socket: corked while several calls are written, so they leave as one write. */
  readonly stream?: { cork(): void; uncork(): void };
}

/** A script call waiting for the next write to Redis. */
interface Queued {
  readonly script: 'llmgwAdmit' | 'llmgwRelease';
  readonly args: Args;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** How long a settle may wait for an admission to ride along with (ms), by default. */
export const SETTLE_DELAY_MS = 5;
/** How long a batch of permits lasts (ms), by default. */
export const BATCH_MS = 1_000;
/** The most permits one batch takes, by default. */
export const BATCH_MOST = 64;
/** The fewest permits worth a batch: a key that would get fewer is admitted request by request. */
export const BATCH_LEAST = 4;
/** How many keys' pace the limiter keeps before it forgets idle ones. */
const PACE_KEYS = 4_096;
/** A batch takes at most this part of a concurrency limit ÷ the routers. */
const LEVEL_SHARE = 1 / 16;
/** A batch takes at most this part of a daily budget ÷ the routers. */
const DAY_SHARE = 1 / 64;

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
  /** Closes a batch when its time is up (default: timers). */
  readonly scheduler?: Scheduler;
  /** Times batches and the key's pace (default: monotonic time; a wall clock that steps back must not let a batch be spent past its end). */
  readonly timer?: Clock;
  /** The rate window (default one minute; tests shorten it). */
  readonly windowMs?: number;
  /** How long a settle may wait to go to Redis in one write with the next admission (ms; default {@link SETTLE_DELAY_MS}). */
  readonly settleDelayMs?: number;
  /** How long a batch of permits lasts (ms; default {@link BATCH_MS}; at most {@link MAX_BATCH_MS} and half the lease). */
  readonly batchMs?: number;
  /** The most permits one batch takes (default {@link BATCH_MOST}); 0: no batches, every request asks Redis. */
  readonly batchMost?: number;
}

/** Permits this router took for one key ahead of use, spent without asking Redis (see RedisLimiter). */
interface Batch {
  readonly id: string;
  readonly key: string;
  readonly limits: KeyLimits;
  readonly day: string;
  /** On this router's clock, from when it was asked for: no permit is used from then on. */
  readonly until: number;
  /** Its request permits: entries `<id>#1` … `<id>#<size>` in the requests window. */
  readonly size: number;
  /** Request permits spent (the first `used` entries). */
  used: number;
  /** Tokens no request of it has reserved (per minute and per day alike; below 0 when requests used more than they reserved). */
  tokensLeft: number;
  /** Tokens its entry (`<id>:<held>`) holds in Redis. */
  held: number;
  /** Its concurrency entries (`<id>#c<i>`) no request holds. */
  readonly freeSlots: string[];
  /** Once given back: the tokens its entry holds as of the last release sent, the slots of requests that ended since, and who waits for that release. */
  sent: number;
  leaving: string[];
  waiters: { resolve(): void; reject(error: unknown): void }[];
  /** Requests admitted from it and not settled. */
  inFlight: number;
  closed: boolean;
  cancel(): void;
  /** What Redis answered when it was granted, and when (this router's clock), for the rate headers. */
  readonly seen: { readonly reqCount: number; readonly reqOldest: number; readonly tokSum: number; readonly tokOldest: number; readonly redisNow: number; readonly at: number };
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
 *
 * Batches: a key busy on this router (at least two admissions within `batchMs`) and far from its
 * limits asks, with an admission, for a batch of permits: up to `batchMost` requests, as many
 * concurrency slots and that many times the request's reserved tokens; no more than this router's
 * part of what a rate allows in `batchMs` (limit × batchMs ÷ window ÷ routers), 1/16 of a
 * concurrency limit ÷ routers or 1/64 of a daily budget ÷ routers, and at least
 * {@link BATCH_LEAST}; a key with only a daily budget does not batch. Redis grants it
 * only while the key's remaining budget holds one like it for each of the routers. The
 * router spends it without a round trip until it runs out or `batchMs` passes, then gives back
 * what it did not use. Limits stay exact: Redis recorded the batch whole before any of it was
 * spent, and its request and token entries are dated at its end, so they count in every window
 * one of its uses falls in. Batches are timed on monotonic time, so a wall-clock step cannot
 * stretch one. An admission whose answer is lost (a timeout) is withdrawn, batch and all, if it
 * ran. What it costs: near a limit no batch is granted (the last N × batch go request by
 * request), and permits a router holds unused are refused to the others for at most `batchMs`;
 * if the router dies holding them, until they leave the window (the lease for slots; the day's
 * end for daily tokens).
 */
export class RedisLimiter implements Limiter {
  private readonly redis: ScriptedRedis;
  private readonly window: number;
  private readonly settleDelayMs: number;
  private readonly batchMs: number;
  private readonly batchMost: number;
  private readonly scheduler: Scheduler;
  private queued: Queued[] = [];
  private settleTimer: NodeJS.Timeout | undefined;
  /** Each key's batch being spent. */
  private readonly open = new Map<string, Batch>();
  /** Every batch open or with requests in flight, by id. */
  private readonly batches = new Map<string, Batch>();
  /** Times batches (monotonic: a wall-clock step must not stretch one). */
  private readonly timer: Clock;
  /** After close(): no more batches. */
  private closed = false;
  /** Given-back batches with requests that ended since their last release was sent. */
  private readonly returning = new Set<Batch>();
  /** Keys with an admission on its way that asks for a batch (one at a time per key), and when its answer is in. */
  private readonly asking = new Map<string, Promise<unknown>>();
  /** Admissions asked for per key in the current and the last period of `batchMs`: how big a batch to ask for. */
  private readonly pace = new Map<string, { start: number; count: number; last: number }>();

  constructor(private readonly options: RedisLimiterOptions) {
    this.window = options.windowMs ?? MINUTE_MS;
    this.settleDelayMs = options.settleDelayMs ?? SETTLE_DELAY_MS;
    const batchMs = options.batchMs ?? BATCH_MS;
    const batchMost = options.batchMost ?? BATCH_MOST;
    if (!Number.isFinite(batchMs) || batchMs < 0) throw new RangeError(`batchMs: expected ms ≥ 0, got ${batchMs}`);
    if (!Number.isInteger(batchMost) || batchMost < 0) throw new RangeError(`batchMost: expected a whole number ≥ 0, got ${batchMost}`);
    // A batch's free concurrency slots are not renewed: it must end well within their lease.
    this.batchMs = Math.min(batchMs, MAX_BATCH_MS, Math.floor(options.leaseMs / 2));
    this.batchMost = batchMost;
    this.scheduler = options.scheduler ?? timerScheduler;
    this.timer = options.timer ?? monotonicClock;
    const r = options.redis;
    if (!('llmgwAdmit' in r)) {
      r.defineCommand('llmgwAdmit', { numberOfKeys: 5, lua: ADMIT_LUA });
      r.defineCommand('llmgwRelease', { numberOfKeys: 5, lua: RELEASE_LUA });
      r.defineCommand('llmgwRenew', { numberOfKeys: 1, lua: RENEW_LUA });
    }
    this.redis = r as unknown as ScriptedRedis;
  }

  /** A permit of the key's open batch, when it has one that serves the request: no round trip. */
  admitNow(request: AdmitRequest): AdmitResult | undefined {
    const open = this.open.get(request.key);
    if (open === undefined) return undefined;
    const now = this.timer.now();
    const spent = this.spend(open, request, wholeTokens(request.reserveTokens), now, utcDay(this.options.clock.now()));
    if (spent === undefined) {
      this.end(open);
      return undefined;
    }
    this.count(request.key, now);
    return spent;
  }

  async admit(request: AdmitRequest): Promise<AdmitResult> {
    const fromBatch = this.admitNow(request);
    if (fromBatch !== undefined) return fromBatch;
    const { limits, key } = request;
    const day = utcDay(this.options.clock.now());
    const n = (v: number | undefined): number => v ?? -1;
    const reserve = wholeTokens(request.reserveTokens);
    this.count(key, this.timer.now());
    const coming = this.asking.get(key);
    if (coming !== undefined) {
      // A batch is on its way for this key: wait for it (one round trip, as going alone would) rather than ask Redis too.
      await coming;
      const fromIt = this.spendOpen(request, reserve, day);
      if (fromIt !== undefined) return fromIt;
    }
    const size = this.batchSize(request, reserve);
    const batchId = `${request.requestId}.batch`;
    const askedAt = this.timer.now();
    let reply: Reply;
    try {
      const asked = this.send<Reply>('llmgwAdmit', [
        ...this.keys(key, day),
        request.requestId,
        this.window,
        n(limits.requestsPerMinute),
        n(limits.tokensPerMinute),
        reserve,
        n(limits.concurrentRequests),
        this.options.leaseMs,
        n(limits.tokensPerDay),
        2 * 86_400,
        batchId,
        size,
        size * reserve,
        this.batchMs,
        Math.max(1, Math.floor(request.routers ?? 1)),
      ]);
      if (size > 0) this.asking.set(key, asked.catch(() => undefined));
      reply = await asked;
    } catch (error) {
      // No answer (a timeout, a dropped connection): the script may still run, or have run. Withdraw
      // what it would have written, if it did, so a batch nobody holds is not left in the windows.
      this.withdraw(request, day, reserve, request.requestId, undefined);
      if (size > 0) this.withdraw(request, day, size * reserve, batchId, size);
      throw error;
    } finally {
      if (size > 0) this.asking.delete(key);
    }
    const [admitted, refused, retry, reqCount, reqOldest, tokSum, tokOldest, redisNow, batched] = reply;
    const seen = { reqCount, reqOldest, tokSum, tokOldest, redisNow, at: this.timer.now() };
    const batch = batched === 1 ? this.grant(batchId, request, day, askedAt, size, size * reserve, seen) : undefined;
    const { requests, tokens } = this.rates(limits, seen, batch);
    if (admitted === 1) {
      const ticket: Ticket = { key, requestId: request.requestId, limits, reserved: reserve, day, via: 'redis' };
      return { admitted: true, ticket, requests, tokens };
    }
    const refusedBy = REFUSALS[refused];
    const retryAfterMs = refusedBy === 'daily-tokens' ? msToNextUtcDay(redisNow) : retry;
    return { admitted: false, refusedBy, retryAfterMs: Math.max(1, Math.ceil(retryAfterMs)), requests, tokens };
  }

  settle(ticket: Ticket, usedTokens: number): Promise<void> | undefined {
    const { limits } = ticket;
    const used = wholeTokens(usedTokens);
    const tokens = limits.tokensPerMinute !== undefined || limits.tokensPerDay !== undefined;
    if (ticket.batch !== undefined) {
      const batch = this.batches.get(ticket.batch);
      if (batch === undefined) return;
      batch.inFlight--;
      if (!batch.closed) {
        // Back to the batch: what it did not use is the batch's to spend again.
        if (tokens) batch.tokensLeft += ticket.reserved - used;
        if (ticket.slot !== undefined) batch.freeSlots.push(ticket.slot);
        return;
      }
      // The batch was given back already: its entry keeps what this request used, and its slot goes,
      // in one call with every other request of it that ends before the next write to Redis.
      if (batch.inFlight === 0) this.batches.delete(batch.id);
      if (tokens) batch.held += used - ticket.reserved;
      if (ticket.slot !== undefined) batch.leaving.push(ticket.slot);
      if (batch.held === batch.sent && batch.leaving.length === 0) return;
      return new Promise<void>((resolve, reject) => {
        batch.waiters.push({ resolve, reject });
        this.returning.add(batch);
        this.settleTimer ??= setTimeout(() => void this.flush([]), this.settleDelayMs);
      });
    }
    const conc = limits.concurrentRequests !== undefined;
    // Nothing to give back: no lease held and no reservation that differs from what was used.
    if (!conc && (!tokens || used === ticket.reserved)) return;
    return this.send<unknown>('llmgwRelease', this.releaseArgs(ticket.key, ticket.day, limits, ticket.requestId, ticket.reserved, tokens ? used : ticket.reserved, undefined, [], conc ? [ticket.requestId] : [])).then(
      () => undefined,
    );
  }

  async renew(tickets: readonly Ticket[]): Promise<void> {
    const byKey = new Map<string, string[]>();
    for (const t of tickets) if (t.limits.concurrentRequests !== undefined) byKey.set(t.key, [...(byKey.get(t.key) ?? []), t.slot ?? t.requestId]);
    for (const [key, ids] of byKey) await this.redis.llmgwRenew(this.keys(key, '')[3], this.options.leaseMs, ...ids);
  }

  /** Gives back every batch's unused permits now (a router shutting down); requests in flight settle as usual. */
  async close(): Promise<void> {
    this.closed = true;
    // Batches asked for before now are given back as they are granted (grant), once their answers are in.
    await Promise.all(this.asking.values());
    for (const batch of [...this.open.values()]) this.end(batch);
    await this.flush([]);
  }

  /**
   * Withdraws what an admission without an answer would have written, if it ran: a request's own
   * entries (`permits` undefined) or a batch's (`permits` of each; `tokens` in all). A key with
   * only a daily budget has no entry to tell by, so its request is not withdrawn (and it never
   * batches). Errors leave the entries to expire.
   */
  private withdraw(request: AdmitRequest, day: string, tokens: number, id: string, permits: number | undefined): void {
    const { limits } = request;
    const rpm = limits.requestsPerMinute !== undefined;
    const conc = limits.concurrentRequests !== undefined;
    const tpm = limits.tokensPerMinute !== undefined;
    const reqEntries = rpm ? (permits === undefined ? [id] : Array.from({ length: permits }, (_, i) => `${id}#${i + 1}`)) : [];
    const concEntries = conc ? (permits === undefined ? [id] : Array.from({ length: permits }, (_, i) => `${id}#c${i + 1}`)) : [];
    const probe: Probe | undefined = rpm ? ['r', reqEntries[0]] : conc ? ['c', concEntries[0]] : tpm ? ['t', `${id}:${tokens}`] : undefined;
    if (probe === undefined) return;
    this.send('llmgwRelease', this.releaseArgs(request.key, day, limits, id, tokens, 0, probe, reqEntries, concEntries)).catch(() => undefined);
  }

  /** Spends one permit of the key's open batch on the request, or ends the batch if it cannot serve it. */
  private spendOpen(request: AdmitRequest, reserve: number, day: string): AdmitResult | undefined {
    const open = this.open.get(request.key);
    if (open === undefined) return undefined;
    const spent = this.spend(open, request, reserve, this.timer.now(), day);
    if (spent === undefined) this.end(open);
    return spent;
  }

  /** Spends one permit of `batch` on the request, or says it cannot (ended, out of something, or the key changed). */
  private spend(batch: Batch, request: AdmitRequest, reserve: number, now: number, day: string): AdmitResult | undefined {
    const { limits } = request;
    const tokens = limits.tokensPerMinute !== undefined || limits.tokensPerDay !== undefined;
    const conc = limits.concurrentRequests !== undefined;
    if (now >= batch.until || batch.day !== day || !sameLimits(batch.limits, limits)) return undefined;
    if (batch.used >= batch.size || (tokens && batch.tokensLeft < reserve) || (conc && batch.freeSlots.length === 0)) return undefined;
    batch.used++;
    if (tokens) batch.tokensLeft -= reserve;
    const slot = conc ? batch.freeSlots.pop() : undefined;
    batch.inFlight++;
    const ticket: Ticket = { key: request.key, requestId: request.requestId, limits, reserved: reserve, day, via: 'redis', batch: batch.id, slot };
    const { requests, tokens: tokenRate } = this.rates(limits, batch.seen, batch);
    return { admitted: true, ticket, requests, tokens: tokenRate };
  }

  /** Records a granted batch and closes it when its time is up (at once, after close()). */
  private grant(id: string, request: AdmitRequest, day: string, askedAt: number, size: number, tokens: number, seen: Batch['seen']): Batch {
    const conc = request.limits.concurrentRequests !== undefined;
    const until = askedAt + this.batchMs;
    const batch: Batch = {
      id,
      key: request.key,
      limits: request.limits,
      day,
      until,
      size,
      used: 0,
      tokensLeft: tokens,
      held: tokens,
      freeSlots: conc ? Array.from({ length: size }, (_, i) => `${id}#c${size - i}`) : [],
      sent: tokens,
      leaving: [],
      waiters: [],
      inFlight: 0,
      closed: false,
      cancel: () => undefined,
      seen,
    };
    batch.cancel = this.scheduler.schedule(until - seen.at, () => this.end(batch));
    const before = this.open.get(request.key);
    if (before !== undefined) this.end(before);
    this.open.set(request.key, batch);
    this.batches.set(id, batch);
    if (this.closed) this.end(batch);
    return batch;
  }

  /** Ends a batch: its unused request permits, tokens and free slots go back to Redis (errors leave them to expire). */
  private end(batch: Batch): void {
    if (batch.closed) return;
    batch.closed = true;
    batch.cancel();
    if (this.open.get(batch.key) === batch) this.open.delete(batch.key);
    if (batch.inFlight === 0) this.batches.delete(batch.id);
    const unused = batch.limits.requestsPerMinute !== undefined ? Array.from({ length: batch.size - batch.used }, (_, i) => `${batch.id}#${batch.used + 1 + i}`) : [];
    const held = batch.held;
    batch.held = held - batch.tokensLeft;
    batch.tokensLeft = 0;
    const slots = batch.freeSlots.splice(0);
    batch.sent = batch.held;
    if (unused.length === 0 && slots.length === 0 && batch.held === held) return;
    this.send('llmgwRelease', this.releaseArgs(batch.key, batch.day, batch.limits, batch.id, held, batch.held, undefined, unused, slots)).catch(() => undefined);
  }

  /** How many permits to ask for with this admission: 0 when the key is not busy here, or too near its limits. */
  private batchSize(request: AdmitRequest, reserve: number): number {
    const { key, limits } = request;
    if (this.closed || this.batchMost === 0 || this.batchMs === 0 || this.asking.has(key)) return 0;
    // A daily budget alone leaves no entry to withdraw a batch by if its answer is lost (withdraw).
    if (limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined && limits.concurrentRequests === undefined) return 0;
    const pace = this.pace.get(key);
    let size = Math.min(this.batchMost, 2 * Math.max(pace?.count ?? 0, pace?.last ?? 0));
    const routers = Math.max(1, Math.floor(request.routers ?? 1));
    const within = (limit: number | undefined, per: number, share: number): void => {
      if (limit !== undefined && per > 0) size = Math.min(size, Math.floor((limit * share) / per));
    };
    // A rate: this router's part of what the limit allows in one batch's time.
    const rateShare = this.batchMs / this.window / routers;
    within(limits.requestsPerMinute, 1, rateShare);
    within(limits.tokensPerMinute, reserve, rateShare);
    // A level: a small part of it per router. The day's budget a smaller part: what a router that
    // dies holding a batch has not used stays spent until the day ends.
    within(limits.concurrentRequests, 1, LEVEL_SHARE / routers);
    within(limits.tokensPerDay, reserve, DAY_SHARE / routers);
    return size >= BATCH_LEAST ? size : 0;
  }

  /** Counts an admission asked for, per key, in periods of `batchMs`. */
  private count(key: string, now: number): void {
    const pace = this.pace.get(key);
    if (pace === undefined) {
      // Keys not seen for two periods say nothing of the next batch: forget them once there are many.
      if (this.pace.size >= PACE_KEYS) for (const [k, p] of this.pace) if (now - p.start >= 2 * this.batchMs) this.pace.delete(k);
      this.pace.set(key, { start: now, count: 1, last: 0 });
      return;
    }
    if (now - pace.start >= this.batchMs) {
      pace.last = now - pace.start < 2 * this.batchMs ? pace.count : 0;
      pace.start = now;
      pace.count = 0;
    }
    pace.count++;
  }

  /** The rate headers' state: Redis's answer when it was given, less what has passed since, plus what this router's batch still holds. */
  /** The key's rates as Redis last said, with what the batch holds unused counted as remaining (every admission asks: no spreads). */
  private rates(limits: KeyLimits, seen: Batch['seen'], batch: Batch | undefined): { requests: RateState | undefined; tokens: RateState | undefined } {
    const since = Math.max(0, this.timer.now() - seen.at);
    const reset = (oldest: number): number => (oldest < 0 ? 0 : Math.max(0, oldest + this.window - seen.redisNow - since));
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    return {
      requests: rpm === undefined ? undefined : { limit: rpm, remaining: rpm - seen.reqCount + (batch !== undefined ? batch.size - batch.used : 0), resetMs: reset(seen.reqOldest) },
      tokens: tpm === undefined ? undefined : { limit: tpm, remaining: tpm - seen.tokSum + (batch !== undefined ? Math.max(0, batch.tokensLeft) : 0), resetMs: reset(seen.tokOldest) },
    };
  }

  /**
   * An admission goes to Redis at once, with every settle waiting written ahead of it in the same
   * write; a settle waits at most settleDelayMs for an admission to ride along with.
   */
  private send<T>(script: Queued['script'], args: Args): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: Queued = { script, args, resolve: resolve as (value: unknown) => void, reject };
      if (script === 'llmgwRelease') {
        this.queued.push(call);
        this.settleTimer ??= setTimeout(() => void this.flush([]), this.settleDelayMs);
        return;
      }
      void this.flush([call]);
    });
  }

  /**
   * Writes the settles waiting and then `after` to Redis as one write (the socket corked while they
   * are sent); resolves when every one has been answered (each caller hears its own outcome).
   */
  private flush(after: Queued[]): Promise<unknown> {
    clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    // Given-back batches' releases go after the calls queued before them (their own give-back among them).
    const returns = [...this.returning].map((b): Queued => {
      const waiters = b.waiters;
      const args = this.releaseArgs(b.key, b.day, b.limits, b.id, b.sent, b.held, undefined, [], b.leaving);
      b.sent = b.held;
      b.leaving = [];
      b.waiters = [];
      return { script: 'llmgwRelease', args, resolve: () => waiters.forEach((w) => w.resolve()), reject: (error) => waiters.forEach((w) => w.reject(error)) };
    });
    this.returning.clear();
    const batch = [...this.queued, ...returns, ...after];
    this.queued = [];
    const stream = batch.length > 1 ? this.redis.stream : undefined;
    stream?.cork();
    try {
      return Promise.all(batch.map((q) => this.redis[q.script](...q.args).then(q.resolve, q.reject)));
    } finally {
      stream?.uncork();
    }
  }

  /** RELEASE_LUA's keys and arguments (its comment says what each is). */
  private releaseArgs(key: string, day: string, limits: KeyLimits, id: string, held: number, kept: number, probe: Probe | undefined, requests: readonly string[], slots: readonly string[]): Args {
    return [...this.keys(key, day), id, held, kept, limits.tokensPerDay !== undefined ? '1' : '0', ...(probe ?? ['', '']), requests.length, ...requests, ...slots];
  }

  /** The five keys of one API key (and day), sharing a hash tag. */
  private keys(key: string, day: string): string[] {
    const base = `${this.options.prefix}{${key}}`;
    return [`${base}:req`, `${base}:tokens`, `${base}:tokensum`, `${base}:conc`, `${base}:day:${day}`];
  }
}

/** A reservation in whole tokens: the amount is part of an entry's name, and settle names it again. */
function wholeTokens(reserve: number): number {
  return Math.max(0, Math.round(reserve));
}

function sameLimits(a: KeyLimits, b: KeyLimits): boolean {
  return a.requestsPerMinute === b.requestsPerMinute && a.tokensPerMinute === b.tokensPerMinute && a.concurrentRequests === b.concurrentRequests && a.tokensPerDay === b.tokensPerDay;
}
