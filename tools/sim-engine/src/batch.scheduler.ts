import type { Clock } from '@llmgw/domain';
import { KvBlockPool, type KvAllocation } from './kv-block.pool';
import { hashInts } from './seeded.rng';

/** The engine model's knobs. Rates are tokens per second; times from the clock are milliseconds. */
export interface SchedulerConfig {
  /** At most this many sequences are admitted (prefilling or decoding) at once. */
  maxRunning: number;
  /** Token budget of one engine step: one per decoding sequence, the rest for prefill chunks. */
  maxBatchedTokens: number;
  /** Prompt tokens computed per second (a step's prefill part takes chunk tokens / prefillTps). */
  prefillTps: number;
  /** Tokens per second one sequence decodes when it decodes alone. */
  decodeTps: number;
  /** Each additional decoding sequence in a step lengthens the step's decode part by this fraction. */
  batchSlowdown: number;
  /** KV cache size in tokens; whole blocks only. */
  kvCapacityTokens: number;
  /** Tokens per KV block, also the prefix cache's unit. */
  blockSize: number;
  /** Reuse cached prompt blocks across sequences. */
  prefixCaching: boolean;
}

/** A sequence to run: its prompt as token ids and how many tokens it will generate (0: prefill only, e.g. embeddings). */
export interface SequenceSpec {
  promptTokens: readonly number[];
  outputTokens: number;
}

/** Receives a sequence's progress. Calls happen after the scheduler's state is consistent. */
export interface SequenceListener {
  /** Token `index` (0-based) was generated at modelled time `at` (ms). The first comes with the end of prefill. */
  onToken?(index: number, at: number): void;
  /** The sequence finished (all tokens generated, or prefill done when it generates none). */
  onDone?(stats: SequenceStats): void;
}

/** A sequence's modelled timeline (clock ms) and token counts; fields fill in as it progresses. */
export interface SequenceStats {
  readonly id: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Prompt tokens found in the prefix cache at admission (skipped by prefill). */
  cachedTokens: number;
  generatedTokens: number;
  readonly arrivedAt: number;
  admittedAt?: number;
  /** When prefill ended and the first token (if any) came out. */
  firstTokenAt?: number;
  finishedAt?: number;
  state: 'waiting' | 'running' | 'done' | 'aborted';
}

/** Aggregate state and counters, what /metrics reports. */
export interface SchedulerSnapshot {
  running: number;
  waiting: number;
  kvUsedBlocks: number;
  kvCapacityBlocks: number;
  /** usedBlocks / capacityBlocks, in [0, 1]. Evictable cached blocks count as free. */
  kvUsage: number;
  promptTokensTotal: number;
  /** Prompt tokens actually computed (prompt minus prefix cache hits). */
  prefillTokensTotal: number;
  generationTokensTotal: number;
  prefixCacheQueriesTotal: number;
  prefixCacheHitsTotal: number;
  stepsTotal: number;
  /** Sum of step time spent on prefill / decode, seconds. */
  prefillSecondsTotal: number;
  decodeSecondsTotal: number;
  /** Sum over steps of decoding sequences in the step (busy slots per decode). */
  decodeSlotsTotal: number;
}

/** Thrown by `submit` for a sequence that could never fit in the KV cache. */
export class SequenceTooLongError extends Error {
  constructor(
    readonly tokens: number,
    readonly capacityTokens: number,
  ) {
    super(`sequence needs ${tokens} tokens of KV cache, the cache holds ${capacityTokens}`);
    this.name = 'SequenceTooLongError';
  }
}

interface Sequence {
  stats: SequenceStats;
  listener: SequenceListener;
  prompt: readonly number[];
  /** Chained hashes of the prompt's full blocks. */
  blockHashes: number[];
  totalBlocks: number;
  alloc?: KvAllocation;
  prefillLeft: number;
}

interface Step {
  start: number;
  end: number;
  decoders: Sequence[];
  prefills: { seq: Sequence; tokens: number }[];
  prefillSeconds: number;
  decodeSeconds: number;
}

type PendingEvent = { kind: 'token'; seq: Sequence; index: number; at: number } | { kind: 'done'; seq: Sequence };

/**
 * Continuous batching over a modelled clock, stepped like vLLM's V1 scheduler:
 * 1. At a step's start, waiting sequences are admitted first-come first-served while fewer
 *    than `maxRunning` run and the head's KV blocks fit; the head that does not fit blocks
 *    the queue (no overtaking).
 * 2. Every decoding sequence takes one token of the step's `maxBatchedTokens` budget; the
 *    rest goes to prefill chunks of admitted sequences in admission order (chunked prefill).
 * 3. The step lasts prefillTokens / prefillTps + (decoding ? (1 + batchSlowdown * (n - 1)) / decodeTps : 0) seconds.
 * 4. At its end each decoder emits one token; a sequence whose prefill completes emits its
 *    first token; finished sequences release their blocks; the next step starts at once.
 * Arrivals during a step wait for the next step. Time only moves when `advance` is called:
 * it processes every step that ended by `clock.now()`, so a late caller catches up exactly.
 */
export class BatchScheduler {
  private readonly pool: KvBlockPool;
  private readonly waitingQ: Sequence[] = [];
  private readonly running: Sequence[] = [];
  private step?: Step;
  private nextId = 1;
  private pending: PendingEvent[] = [];
  private readonly counters = {
    promptTokensTotal: 0,
    prefillTokensTotal: 0,
    generationTokensTotal: 0,
    prefixCacheQueriesTotal: 0,
    prefixCacheHitsTotal: 0,
    stepsTotal: 0,
    prefillSecondsTotal: 0,
    decodeSecondsTotal: 0,
    decodeSlotsTotal: 0,
  };

  constructor(
    readonly config: SchedulerConfig,
    private readonly clock: Clock,
  ) {
    const problems = validateSchedulerConfig(config);
    if (problems.length > 0) throw new RangeError(`invalid scheduler config: ${problems.join('; ')}`);
    this.pool = new KvBlockPool(Math.floor(config.kvCapacityTokens / config.blockSize), config.blockSize, config.prefixCaching);
  }

  /** KV capacity in whole tokens (whole blocks). */
  get capacityTokens(): number {
    return this.pool.capacityBlocks * this.pool.blockSize;
  }

  /**
   * Queues a sequence at `clock.now()`. Throws SequenceTooLongError when prompt + output could
   * never fit the KV cache, and RangeError for an empty prompt or a bad output count.
   */
  submit(spec: SequenceSpec, listener: SequenceListener = {}): SequenceStats {
    if (spec.promptTokens.length < 1) throw new RangeError('a sequence needs at least one prompt token');
    if (!Number.isInteger(spec.outputTokens) || spec.outputTokens < 0) throw new RangeError(`outputTokens must be an integer >= 0, got ${spec.outputTokens}`);
    const bs = this.config.blockSize;
    const tokens = spec.promptTokens.length + spec.outputTokens;
    const totalBlocks = Math.ceil(tokens / bs);
    if (totalBlocks > this.pool.capacityBlocks) throw new SequenceTooLongError(tokens, this.capacityTokens);
    this.advance();
    const now = this.clock.now();
    const blockHashes: number[] = [];
    if (this.config.prefixCaching) {
      let parent = 0;
      for (let b = 0; (b + 1) * bs <= spec.promptTokens.length; b++) {
        parent = hashInts(parent, spec.promptTokens, b * bs, (b + 1) * bs);
        blockHashes.push(parent);
      }
    }
    const seq: Sequence = {
      stats: {
        id: this.nextId++,
        promptTokens: spec.promptTokens.length,
        outputTokens: spec.outputTokens,
        cachedTokens: 0,
        generatedTokens: 0,
        arrivedAt: now,
        state: 'waiting',
      },
      listener,
      prompt: spec.promptTokens,
      blockHashes,
      totalBlocks,
      prefillLeft: spec.promptTokens.length,
    };
    this.waitingQ.push(seq);
    if (this.step === undefined) this.startStep(now);
    this.flush();
    return seq.stats;
  }

  /** Stops a waiting or running sequence and frees its blocks. No further events for it. False if it already ended. */
  cancel(stats: SequenceStats): boolean {
    this.advance();
    const inWaiting = this.waitingQ.findIndex((s) => s.stats === stats);
    if (inWaiting >= 0) {
      const [seq] = this.waitingQ.splice(inWaiting, 1);
      seq.stats.state = 'aborted';
      seq.stats.finishedAt = this.clock.now();
      return true;
    }
    const inRunning = this.running.findIndex((s) => s.stats === stats);
    if (inRunning < 0) return false;
    const [seq] = this.running.splice(inRunning, 1);
    if (seq.alloc) this.pool.release(seq.alloc);
    seq.stats.state = 'aborted';
    seq.stats.finishedAt = this.clock.now();
    // The current step keeps its duration (the batch was already launched) but drops the sequence.
    if (this.step) {
      this.step.decoders = this.step.decoders.filter((s) => s !== seq);
      this.step.prefills = this.step.prefills.filter((p) => p.seq !== seq);
    }
    // Freed blocks may let the queue move at the next step; if idle now, start one.
    if (this.step === undefined) this.startStep(this.clock.now());
    return true;
  }

  /** Processes every step that ended by now, then delivers the events they produced. */
  advance(): void {
    const now = this.clock.now();
    while (this.step !== undefined && this.step.end <= now) {
      const done = this.step;
      this.step = undefined;
      this.completeStep(done);
      this.startStep(done.end);
    }
    this.flush();
  }

  /** When the current step ends (clock ms), or undefined when idle. */
  nextEventAt(): number | undefined {
    return this.step?.end;
  }

  snapshot(): SchedulerSnapshot {
    return {
      running: this.running.length,
      waiting: this.waitingQ.length,
      kvUsedBlocks: this.pool.usedBlocks,
      kvCapacityBlocks: this.pool.capacityBlocks,
      kvUsage: this.pool.usedBlocks / this.pool.capacityBlocks,
      ...this.counters,
    };
  }

  private startStep(at: number): void {
    // 1. admit, first come first served, while slots and KV blocks allow
    while (this.waitingQ.length > 0 && this.running.length < this.config.maxRunning) {
      const head = this.waitingQ[0];
      const maxHit = Math.floor((head.prompt.length - 1) / this.config.blockSize); // always compute >= 1 token
      const alloc = this.pool.allocate(head.blockHashes, head.totalBlocks, maxHit);
      if (alloc === undefined) break;
      this.waitingQ.shift();
      head.alloc = alloc;
      head.stats.cachedTokens = alloc.hitBlocks * this.config.blockSize;
      head.prefillLeft = head.prompt.length - head.stats.cachedTokens;
      head.stats.admittedAt = at;
      head.stats.state = 'running';
      this.counters.promptTokensTotal += head.prompt.length;
      if (this.config.prefixCaching) {
        this.counters.prefixCacheQueriesTotal += head.prompt.length;
        this.counters.prefixCacheHitsTotal += head.stats.cachedTokens;
      }
      this.running.push(head);
    }
    // 2. fill the token budget: decoders first, then prefill chunks
    const decoders = this.running.filter((s) => s.prefillLeft === 0);
    let budget = this.config.maxBatchedTokens - decoders.length;
    const prefills: Step['prefills'] = [];
    for (const seq of this.running) {
      if (budget <= 0) break;
      if (seq.prefillLeft === 0) continue;
      const tokens = Math.min(seq.prefillLeft, budget);
      prefills.push({ seq, tokens });
      budget -= tokens;
    }
    if (decoders.length === 0 && prefills.length === 0) return; // idle
    // 3. how long the step takes
    const prefillTokens = prefills.reduce((sum, p) => sum + p.tokens, 0);
    const prefillSeconds = prefillTokens / this.config.prefillTps;
    const decodeSeconds = decoders.length === 0 ? 0 : (1 + this.config.batchSlowdown * (decoders.length - 1)) / this.config.decodeTps;
    this.step = { start: at, end: at + (prefillSeconds + decodeSeconds) * 1000, decoders, prefills, prefillSeconds, decodeSeconds };
  }

  private completeStep(step: Step): void {
    const at = step.end;
    this.counters.stepsTotal++;
    this.counters.prefillSecondsTotal += step.prefillSeconds;
    this.counters.decodeSecondsTotal += step.decodeSeconds;
    this.counters.decodeSlotsTotal += step.decoders.length;
    // 4. decoders emit one token each; completed prefills emit their first token
    for (const seq of step.decoders) this.emit(seq, at);
    for (const { seq, tokens } of step.prefills) {
      seq.prefillLeft -= tokens;
      this.counters.prefillTokensTotal += tokens;
      if (seq.prefillLeft > 0) continue;
      seq.stats.firstTokenAt = at;
      if (seq.alloc) this.pool.commit(seq.alloc, seq.blockHashes);
      if (seq.stats.outputTokens === 0) this.finish(seq, at);
      else this.emit(seq, at);
    }
  }

  private emit(seq: Sequence, at: number): void {
    const index = seq.stats.generatedTokens++;
    this.counters.generationTokensTotal++;
    this.pending.push({ kind: 'token', seq, index, at });
    if (seq.stats.generatedTokens >= seq.stats.outputTokens) this.finish(seq, at);
  }

  private finish(seq: Sequence, at: number): void {
    const i = this.running.indexOf(seq);
    if (i >= 0) this.running.splice(i, 1);
    if (seq.alloc) this.pool.release(seq.alloc);
    seq.stats.state = 'done';
    seq.stats.finishedAt = at;
    this.pending.push({ kind: 'done', seq });
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const events = this.pending;
    this.pending = [];
    for (const e of events) {
      if (e.seq.stats.state === 'aborted') continue;
      if (e.kind === 'token') e.seq.listener.onToken?.(e.index, e.at);
      else e.seq.listener.onDone?.(e.seq.stats);
    }
  }
}

/** Every problem with a scheduler config, as `name: message` strings (empty when valid). */
export function validateSchedulerConfig(c: SchedulerConfig): string[] {
  const problems: string[] = [];
  const posInt = (name: string, v: number): void => {
    if (!Number.isInteger(v) || v < 1) problems.push(`${name}: expected a positive integer, got ${v}`);
  };
  const posRate = (name: string, v: number): void => {
    if (!Number.isFinite(v) || v <= 0) problems.push(`${name}: expected a finite number > 0, got ${v}`);
  };
  posInt('maxRunning', c.maxRunning);
  posInt('maxBatchedTokens', c.maxBatchedTokens);
  posInt('kvCapacityTokens', c.kvCapacityTokens);
  posInt('blockSize', c.blockSize);
  posRate('prefillTps', c.prefillTps);
  posRate('decodeTps', c.decodeTps);
  if (!Number.isFinite(c.batchSlowdown) || c.batchSlowdown < 0) problems.push(`batchSlowdown: expected a finite number >= 0, got ${c.batchSlowdown}`);
  if (c.maxBatchedTokens < c.maxRunning) problems.push(`maxBatchedTokens (${c.maxBatchedTokens}) must be >= maxRunning (${c.maxRunning})`);
  if (c.kvCapacityTokens < c.blockSize) problems.push(`kvCapacityTokens (${c.kvCapacityTokens}) must hold at least one block of ${c.blockSize}`);
  return problems;
}
