import { DEFAULT_PREFIX_AFFINITY, type ApiEndpoint, type ModelRouting, type PrefixAffinityParams, type RoutingPolicyName } from '@llmgw/domain';
import type { Candidate } from './candidate';
import { estimatedOccupancy, type LoadFigures } from './scorers';

/** The API a prompt came in on: chat messages or a completion's prompt. */
export type PromptApi = 'chat' | 'completions';

/** A request's prefix key: the chained hash of its leading blocks and how many blocks it covers. */
export interface PrefixKey {
  /** Unsigned 32-bit chained hash of the first `blocks` blocks. */
  readonly hash: number;
  /** Blocks hashed into the key, 1..maxBlocks. */
  readonly blocks: number;
}

/** Record separator between messages and unit separator between a message's parts. */
const RS = '\u001e';
const US = '\u001f';

/**
 * Bounded text builder: stops taking text once `limit` characters are in, so a 200 KB prompt
 * costs what the affinity needs and no more.
 */
class Bounded {
  text = '';
  constructor(private readonly limit: number) {}
  get full(): boolean {
    return this.text.length >= this.limit;
  }
  add(s: string): void {
    if (this.full) return;
    this.text += s.length > this.limit - this.text.length ? s.slice(0, this.limit - this.text.length) : s;
  }
}

/** JSON with object keys sorted, written into `out` until it is full (same value → same text). */
function canonicalJson(v: unknown, out: Bounded): void {
  if (out.full) return;
  if (v === null || typeof v !== 'object') {
    out.add(JSON.stringify(v) ?? 'null');
    return;
  }
  if (Array.isArray(v)) {
    out.add('[');
    for (let i = 0; i < v.length && !out.full; i++) {
      if (i > 0) out.add(',');
      canonicalJson(v[i], out);
    }
    out.add(']');
    return;
  }
  const o = v as Record<string, unknown>;
  out.add('{');
  let first = true;
  for (const k of Object.keys(o).sort()) {
    if (out.full) return;
    if (o[k] === undefined) continue;
    if (!first) out.add(',');
    first = false;
    out.add(JSON.stringify(k));
    out.add(':');
    canonicalJson(o[k], out);
  }
  out.add('}');
}

/** A message's content: a string as it is, text parts as their text, other parts as canonical JSON. */
function renderContent(content: unknown, out: Bounded): void {
  if (typeof content === 'string') return out.add(content);
  if (!Array.isArray(content)) return canonicalJson(content ?? null, out);
  for (const part of content) {
    if (out.full) return;
    const p = part as { type?: unknown; text?: unknown } | null;
    if (p !== null && typeof p === 'object' && p.type === 'text' && typeof p.text === 'string') out.add(p.text);
    else canonicalJson(part, out);
    out.add(US);
  }
}

/**
 * The leading part of a request's prompt as canonical text, at most `limitChars` characters, or
 * undefined when the body has no prompt to key on.
 *
 * - chat: the tool definitions (canonical JSON), then each message as role, name, content and
 *   tool calls, up to and including the first message that is not `system`/`developer` (the
 *   conversation's start, which every later turn repeats), so all turns of a conversation key
 *   alike. Key order and whitespace of the JSON body do not matter.
 * - completions: the prompt as given (a string), or canonical JSON of any other prompt shape.
 */
export function renderPromptPrefix(body: unknown, api: PromptApi, limitChars: number): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const b = body as { messages?: unknown; tools?: unknown; prompt?: unknown };
  const out = new Bounded(limitChars);
  if (api === 'completions') {
    if (b.prompt === undefined) return undefined;
    if (typeof b.prompt === 'string') out.add(b.prompt);
    else canonicalJson(b.prompt, out);
    return out.text.length > 0 ? out.text : undefined;
  }
  if (!Array.isArray(b.messages) || b.messages.length === 0) return undefined;
  if (Array.isArray(b.tools) && b.tools.length > 0) {
    out.add(`${RS}tools${US}`);
    canonicalJson(b.tools, out);
  }
  for (const m of b.messages) {
    if (out.full) break;
    if (m === null || typeof m !== 'object') return undefined;
    const msg = m as { role?: unknown; name?: unknown; content?: unknown; tool_calls?: unknown };
    out.add(`${RS}${typeof msg.role === 'string' ? msg.role : '?'}${US}`);
    if (typeof msg.name === 'string') out.add(`${msg.name}${US}`);
    renderContent(msg.content, out);
    if (msg.tool_calls !== undefined) {
      out.add(US);
      canonicalJson(msg.tool_calls, out);
    }
    if (msg.role !== 'system' && msg.role !== 'developer') break;
  }
  return out.text;
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a (32-bit) over the UTF-8 bytes of `s[from, to)`, continuing from `h`. Lone surrogates hash as U+FFFD. */
export function fnv1aUtf8(s: string, from: number, to: number, h = FNV_OFFSET): number {
  const byte = (b: number): void => {
    h = Math.imul(h ^ b, FNV_PRIME);
  };
  for (let i = from; i < to; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      byte(c);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < to) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
        byte(0xf0 | (c >> 18));
        byte(0x80 | ((c >> 12) & 0x3f));
        byte(0x80 | ((c >> 6) & 0x3f));
        byte(0x80 | (c & 0x3f));
        continue;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x800) {
      byte(0xc0 | (c >> 6));
      byte(0x80 | (c & 0x3f));
    } else {
      byte(0xe0 | (c >> 12));
      byte(0x80 | ((c >> 6) & 0x3f));
      byte(0x80 | (c & 0x3f));
    }
  }
  return h >>> 0;
}

/** Murmur3's 32-bit finaliser: spreads every input bit over the output. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Cuts `text` into blocks of `blockChars` characters (the last one may be shorter) and chains
 * their hashes: each block's hash is FNV-1a over its UTF-8 bytes seeded with the previous block's,
 * so the key of block n says "these n blocks, in this order". Hashes at most `maxBlocks` blocks,
 * whatever the text's length. Undefined for empty text. Pure and deterministic.
 */
export function prefixKey(text: string, blockChars: number, maxBlocks: number): PrefixKey | undefined {
  if (text.length === 0) return undefined;
  let h = FNV_OFFSET;
  let blocks = 0;
  for (let from = 0; from < text.length && blocks < maxBlocks; from += blockChars) {
    h = fmix32(fnv1aUtf8(text, from, Math.min(text.length, from + blockChars), h) ^ blocks);
    blocks++;
  }
  return { hash: h, blocks };
}

/** The prefix key of a request body (see renderPromptPrefix and prefixKey); undefined when it has no prompt. */
export function requestPrefixKey(body: unknown, api: PromptApi, params: PrefixAffinityParams = DEFAULT_PREFIX_AFFINITY): PrefixKey | undefined {
  const text = renderPromptPrefix(body, api, params.blockChars * params.maxBlocks);
  return text === undefined ? undefined : prefixKey(text, params.blockChars, params.maxBlocks);
}

/** A replica id's hash, for rendezvous weights. */
function idHash(id: string): number {
  return fmix32(fnv1aUtf8(id, 0, id.length, FNV_OFFSET));
}

/**
 * The candidates in rendezvous (highest-random-weight) order for `key`: each replica's weight is
 * a hash of the key and its id alone, so every router given the same replica set orders them the
 * same way, and a replica leaving only moves the keys it was first for (about 1/n of them).
 * Equal weights (a 32-bit collision) fall back to the id, so the order is total.
 */
export function rendezvousOrder<C extends Candidate>(key: number, candidates: readonly C[]): C[] {
  const weighted = candidates.map((c) => ({ c, w: fmix32(key ^ idHash(c.id)) }));
  weighted.sort((a, b) => b.w - a.w || (a.c.id < b.c.id ? -1 : a.c.id > b.c.id ? 1 : 0));
  return weighted.map((x) => x.c);
}

/**
 * The load a replica may carry before the guard passes it over: ⌈(1 + ε) × (total + 1) / n⌉
 * over the guard loads of `n` candidates, the request being placed counted (consistent hashing
 * with bounded loads). Always ≥ 1, and always above the least loaded candidate.
 */
export function loadCap(loads: readonly number[], epsilon: number): number {
  let total = 0;
  for (const l of loads) total += l;
  return Math.max(1, Math.ceil(((1 + epsilon) * (total + 1)) / loads.length));
}

/**
 * What the guard weighs a replica by: its estimated occupancy (see estimatedOccupancy), with this
 * router's requests there that have had no output yet counted a second time. In an engine that
 * steps all its sequences together, a request in prefill holds a slot and also makes the next
 * request wait for its prefill, while one already decoding costs the next request a small share
 * of a step.
 */
export function guardLoad(c: LoadFigures): number {
  return estimatedOccupancy(c) + (c.awaitingOutput ?? 0);
}

/** This router's requests at `c` that have had no output yet. */
function awaitingOf(c: Candidate): number {
  return c.awaitingOutput ?? 0;
}

/** A candidate's guard load averaged over the last seconds (see Candidate.averageLoad); its load now when the router keeps none. */
function averageOf(c: Candidate): number {
  return c.averageLoad ?? guardLoad(c);
}

/**
 * The most a replica's average load may be before the guard passes it over: (1 + ε) × the mean
 * of the candidates' averages, and never below 1. Some candidate is always under it (the lowest
 * average is at most the mean). Below one request on average the figure says nothing about
 * balance: in a quiet fleet the replica that served the last few requests is far above a mean
 * near 0, and without the floor a lone conversation would be sent away from its own cache.
 */
export function averageCap(averages: readonly number[], epsilon: number): number {
  let total = 0;
  for (const a of averages) total += a;
  return Math.max(1, ((1 + epsilon) * total) / averages.length);
}

/** A prefix-affinity choice and why it was made. */
export interface AffinityChoice<C extends Candidate> {
  readonly chosen: C;
  /** Position of `chosen` in the key's rendezvous order: 0 = the prefix's home replica. */
  readonly rank: number;
  /** Ids of the replicas passed over before `chosen`: over a cap, saturated, or with more requests awaiting output than `chosen` (the two choices). */
  readonly deflectedFrom: readonly string[];
  /** The cap on load now (see loadCap). */
  readonly cap: number;
  /** The cap on average load (see averageCap). */
  readonly averageCap: number;
  /**
   * Set when `chosen` is not the first replica under both caps: because that one has more of this
   * router's requests awaiting output (the key's runner-up by the two choices), or because a cold
   * key went where the load said. The id of the first replica under both caps.
   */
  readonly busier?: string;
  /** The key was cold (this router has not placed it lately; see RecentKeys): chosen by load (the caller's `cold` chooser) among all under both caps. */
  readonly cold?: true;
}

/**
 * Prefix affinity with the load guard: the first candidate in `key`'s rendezvous order that is
 * under both caps and not `saturated` —
 * - its guard load now (see guardLoad) below the cap (see loadCap): a burst never piles onto one
 *   replica;
 * - its average guard load over the last seconds (see Candidate.averageLoad) at most
 *   (1 + ε) × the mean of the averages (see averageCap): a replica kept busy by a popular prefix
 *   sheds it, while one that is a request above the mean for a moment keeps its prefixes. With
 *   16 requests on 8 replicas the cap now is 3 for any ε below 0.5, so it alone lets a hot
 *   prefix's home sit at 1.5 × the mean for as long as the prefix stays hot; the average holds
 *   it to 1 + ε, without deflecting a request each time a home is one above the mean.
 * Of the first two under both, the second when it has fewer of this router's requests awaiting
 * output (two choices, both within the key's own order: a request does not queue behind another's
 * prefill while the key's runner-up is idle). For a cold key (one this router has not placed
 * lately, so no replica is likely to hold its prefix: see RecentKeys), `cold` is given and chooses
 * among all the candidates under both caps, in the key's order: affinity buys such a request
 * nothing, so it goes by load (the router passes its least-load picker), and the key's later
 * requests go by its order. When no candidate is under both, the first under
 * the cap now. Undefined only when every
 * candidate is saturated or at the cap (the caller then decides as it would without affinity);
 * the guard never picks a replica at or above the cap while one below exists.
 */
export function chooseByAffinity<C extends Candidate>(
  key: number,
  candidates: readonly C[],
  epsilon: number,
  saturated: (c: C) => boolean = () => false,
  cold?: (underBoth: readonly C[]) => C,
): AffinityChoice<C> | undefined {
  if (candidates.length === 0) return undefined;
  const loadOf = new Map<C, number>();
  for (const c of candidates) loadOf.set(c, guardLoad(c));
  const cap = loadCap([...loadOf.values()], epsilon);
  const avgCap = averageCap(candidates.map(averageOf), epsilon);
  const order = rendezvousOrder(key, candidates);
  const passedOver = (rank: number): string[] => order.slice(0, rank).map((c) => c.id);
  const underBoth = (c: C): boolean => (loadOf.get(c) as number) < cap && averageOf(c) <= avgCap && !saturated(c);
  const first = order.findIndex(underBoth);
  if (first >= 0 && cold !== undefined) {
    // Nothing to keep: chosen by load among all under both caps.
    const chosen = cold(order.filter(underBoth));
    const rank = order.indexOf(chosen);
    if (rank < 0 || !underBoth(chosen)) throw new Error('chooseByAffinity: the cold chooser returned a candidate it was not given');
    return { chosen, rank, deflectedFrom: passedOver(rank), cap, averageCap: avgCap, cold: true, ...(rank !== first && { busier: order[first].id }) };
  }
  if (first >= 0) {
    // Two choices inside the key's order: the next replica under both caps takes the request when
    // it has fewer of this router's requests still waiting for output. Both are where the key
    // goes (the second is where it goes whenever the first is passed over), so both tend to hold
    // its prefix, and a request no longer queues behind another's prefill while the runner-up is free.
    const offset = order.slice(first + 1).findIndex(underBoth);
    const second = offset >= 0 ? first + 1 + offset : -1;
    if (second >= 0 && awaitingOf(order[second]) < awaitingOf(order[first])) {
      return { chosen: order[second], rank: second, deflectedFrom: passedOver(second), cap, averageCap: avgCap, busier: order[first].id };
    }
    return { chosen: order[first], rank: first, deflectedFrom: passedOver(first), cap, averageCap: avgCap };
  }
  for (let rank = 0; rank < order.length; rank++) {
    const c = order[rank];
    if ((loadOf.get(c) as number) < cap && !saturated(c)) return { chosen: c, rank, deflectedFrom: passedOver(rank), cap, averageCap: avgCap };
  }
  return undefined;
}

/**
 * The policy a request on `api` gets for a model routed by `routing`: the catalog's when it says,
 * else prefix-affinity for chat and completions and least-load for embeddings (no prompt to
 * reuse). A prefix-affinity policy on embeddings has no prompt to key on either: least-load.
 */
export function policyFor(routing: ModelRouting | undefined, api: ApiEndpoint): RoutingPolicyName {
  const policy = routing?.policy ?? (api === 'embeddings' ? 'least-load' : 'prefix-affinity');
  return policy === 'prefix-affinity' && api === 'embeddings' ? 'least-load' : policy;
}

/** The prefix-affinity parameters of `routing`, defaults filled in (DEFAULT_PREFIX_AFFINITY). */
export function prefixAffinityParams(routing: ModelRouting | undefined): PrefixAffinityParams {
  const p = routing?.prefixAffinity;
  if (p === undefined) return DEFAULT_PREFIX_AFFINITY;
  return { ...DEFAULT_PREFIX_AFFINITY, ...p };
}

/**
 * The prefix keys a router has placed lately (one instance per model): a set of at most
 * `capacity` keys that forgets the least recently placed first. A key it does not hold is cold:
 * no request of it has gone anywhere from here lately, so no replica is likely to hold its prefix
 * (other routers may have placed it; that costs at most one miss per router). What it forgets
 * past `capacity` keys, the engines' caches have most likely let go too.
 */
export class RecentKeys {
  private readonly keys = new Set<number>();

  constructor(private readonly capacity = 8_192) {}

  /** Whether `key` was placed lately; it counts as placed now either way. */
  placed(key: number): boolean {
    const known = this.keys.delete(key);
    this.keys.add(key);
    if (!known && this.keys.size > this.capacity) this.keys.delete(this.keys.values().next().value as number);
    return known;
  }

  get size(): number {
    return this.keys.size;
  }
}

/** Round-robin over whatever candidates each call gets; one instance per model. */
export class RoundRobin {
  private next = 0;

  choose<C>(candidates: readonly C[]): C {
    const c = candidates[this.next % candidates.length];
    this.next = (this.next + 1) % 1_000_000_007;
    return c;
  }
}
