import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BatchScheduler, SequenceTooLongError, type SchedulerConfig, type SequenceStats } from './batch.scheduler';

class ManualClock {
  t = 0;
  now(): number {
    return this.t;
  }
}

const BASE: SchedulerConfig = {
  maxRunning: 8,
  maxBatchedTokens: 100_000,
  prefillTps: 1000,
  decodeTps: 100,
  batchSlowdown: 0,
  kvCapacityTokens: 100_000,
  blockSize: 16,
  prefixCaching: false,
};

function setup(overrides: Partial<SchedulerConfig> = {}) {
  const clock = new ManualClock();
  const s = new BatchScheduler({ ...BASE, ...overrides }, clock);
  /** Moves the clock to the end of the current step and processes it. */
  const stepOnce = (): void => {
    clock.t = s.nextEventAt() ?? clock.t;
    s.advance();
  };
  /** Moves the clock from step end to step end until idle (or a time limit). */
  const runUntilIdle = (limitMs = 1e9): void => {
    for (let next = s.nextEventAt(); next !== undefined && next <= limitMs; next = s.nextEventAt()) {
      clock.t = next;
      s.advance();
    }
  };
  return { clock, s, stepOnce, runUntilIdle };
}

const prompt = (n: number, salt = 0): number[] => Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729) >>> 0);

describe('BatchScheduler timing', () => {
  it('prefills at prefillTps, emits the first token with prefill, then one token per decode step', () => {
    const { s, runUntilIdle } = setup();
    const tokens: [number, number][] = [];
    let done: SequenceStats | undefined;
    s.submit({ promptTokens: prompt(100), outputTokens: 10 }, { onToken: (i, at) => tokens.push([i, at]), onDone: (st) => (done = st) });
    runUntilIdle();
    // 100 tokens / 1000 tok/s = 100 ms; then 9 more tokens at 10 ms each.
    expect(tokens.map(([i]) => i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(tokens[0][1]).toBeCloseTo(100);
    expect(tokens[9][1]).toBeCloseTo(190);
    expect(done).toMatchObject({ firstTokenAt: 100, state: 'done', generatedTokens: 10, cachedTokens: 0 });
    expect(done?.finishedAt).toBeCloseTo(190);
  });

  it('lengthens a decode step by batchSlowdown per extra sequence', () => {
    const { s, runUntilIdle } = setup({ batchSlowdown: 0.5, prefillTps: 1e9 });
    const a: number[] = [];
    const b: number[] = [];
    s.submit({ promptTokens: prompt(1), outputTokens: 6 }, { onToken: (_, at) => a.push(at) });
    s.submit({ promptTokens: prompt(1, 1), outputTokens: 6 }, { onToken: (_, at) => b.push(at) });
    runUntilIdle();
    // b joins at the step after a's (arrivals wait for a step boundary); while both decode a step
    // takes (1 + 0.5) / 100 s = 15 ms, once b decodes alone 10 ms.
    expect(a[3] - a[2]).toBeCloseTo(15);
    expect(b[5] - b[4]).toBeCloseTo(10);
  });

  it('chunks a long prefill so running sequences keep decoding through it', () => {
    const { clock, s, runUntilIdle } = setup({ maxBatchedTokens: 64, prefillTps: 1000, decodeTps: 100 });
    const decoderTimes: number[] = [];
    s.submit({ promptTokens: prompt(1), outputTokens: 30 }, { onToken: (_, at) => decoderTimes.push(at) });
    clock.t = 5;
    s.advance();
    const long = s.submit({ promptTokens: prompt(640, 3), outputTokens: 1 });
    runUntilIdle();
    const during = decoderTimes.filter((t) => t > 5 && t < (long.firstTokenAt ?? 0));
    expect(during.length).toBeGreaterThanOrEqual(9); // 640 tokens in chunks of <= 63, one decode token per chunk
    // Prefill work is linear in tokens: 640 ms of prefill plus the decode parts of the shared steps.
    expect((long.firstTokenAt ?? 0) - (long.admittedAt ?? 0)).toBeGreaterThan(640);
  });

  it('processes late advances exactly as step-by-step ones (timer granularity does not change the model)', () => {
    const run = (stepwise: boolean): number[] => {
      const { clock, s, runUntilIdle } = setup({ maxRunning: 2, batchSlowdown: 0.1 });
      const stats = [0, 1, 2, 3].map((i) => s.submit({ promptTokens: prompt(50 + i * 10, i), outputTokens: 5 + i }));
      if (stepwise) runUntilIdle();
      else {
        clock.t = 1e7;
        s.advance();
      }
      return stats.flatMap((st) => [st.admittedAt ?? -1, st.firstTokenAt ?? -1, st.finishedAt ?? -1]);
    };
    expect(run(false)).toEqual(run(true));
  });
});

describe('BatchScheduler admission', () => {
  it('runs at most maxRunning sequences; the rest wait and are admitted first come first served', () => {
    const { s, stepOnce, runUntilIdle } = setup({ maxRunning: 4 });
    const stats = Array.from({ length: 10 }, (_, i) => s.submit({ promptTokens: prompt(20, i), outputTokens: 5 + (i % 3) }));
    // The first arrival started a step alone; the others join at the next step boundary.
    expect(s.snapshot()).toMatchObject({ running: 1, waiting: 9 });
    stepOnce();
    expect(s.snapshot()).toMatchObject({ running: 4, waiting: 6 });
    runUntilIdle();
    expect(s.snapshot()).toMatchObject({ running: 0, waiting: 0, kvUsedBlocks: 0 });
    const admitted = stats.map((st) => st.admittedAt ?? Infinity);
    expect([...admitted].sort((a, b) => a - b)).toEqual(admitted);
    expect(stats.every((st) => st.state === 'done')).toBe(true);
  });

  it('admits a sequence only when its prompt and output fit the KV cache, and never overtakes', () => {
    // 8 blocks of 16 tokens; each sequence needs 3 blocks (40 + 8 tokens).
    const { s, stepOnce, runUntilIdle } = setup({ kvCapacityTokens: 128 });
    const a = s.submit({ promptTokens: prompt(40, 1), outputTokens: 8 });
    const b = s.submit({ promptTokens: prompt(40, 2), outputTokens: 8 });
    const c = s.submit({ promptTokens: prompt(40, 3), outputTokens: 8 });
    const small = s.submit({ promptTokens: prompt(4, 4), outputTokens: 1 });
    stepOnce();
    expect(s.snapshot()).toMatchObject({ running: 2, waiting: 2, kvUsedBlocks: 6, kvUsage: 6 / 8 });
    runUntilIdle();
    expect(c.admittedAt).toBeGreaterThanOrEqual(a.finishedAt ?? Infinity);
    expect(small.admittedAt).toBeGreaterThanOrEqual(c.admittedAt ?? Infinity); // FIFO: it does not jump the queue
    expect(b.state).toBe('done');
  });

  it('refuses a sequence that could never fit', () => {
    const { s } = setup({ kvCapacityTokens: 64 });
    expect(() => s.submit({ promptTokens: prompt(60), outputTokens: 10 })).toThrow(SequenceTooLongError);
    expect(() => s.submit({ promptTokens: [], outputTokens: 1 })).toThrow(RangeError);
    expect(s.snapshot()).toMatchObject({ running: 0, waiting: 0 });
  });

  it('finishes a prefill-only sequence (embeddings) at the end of prefill without tokens', () => {
    const { s, runUntilIdle } = setup();
    const tokens: number[] = [];
    const st = s.submit({ promptTokens: prompt(50), outputTokens: 0 }, { onToken: (i) => tokens.push(i) });
    runUntilIdle();
    expect(tokens).toEqual([]);
    expect(st).toMatchObject({ state: 'done', firstTokenAt: 50, finishedAt: 50, generatedTokens: 0 });
  });

  it('cancels waiting and running sequences, frees their blocks and sends them nothing more', () => {
    const { clock, s, runUntilIdle } = setup({ maxRunning: 1 });
    const seen: number[] = [];
    const running = s.submit({ promptTokens: prompt(10), outputTokens: 100 }, { onToken: (i) => seen.push(i) });
    const waiting = s.submit({ promptTokens: prompt(10, 1), outputTokens: 3 });
    clock.t = 30;
    s.advance();
    expect(s.cancel(running)).toBe(true);
    const seenAtCancel = seen.length;
    expect(s.snapshot().running).toBe(0);
    runUntilIdle();
    expect(seen.length).toBe(seenAtCancel);
    expect(running.state).toBe('aborted');
    expect(waiting.state).toBe('done');
    expect(s.cancel(waiting)).toBe(false);
    const queued = [s.submit({ promptTokens: prompt(10, 2), outputTokens: 50 }), s.submit({ promptTokens: prompt(10, 3), outputTokens: 3 })];
    expect(s.cancel(queued[1])).toBe(true);
    expect(s.snapshot().waiting).toBe(0);
    runUntilIdle();
    expect(s.snapshot()).toMatchObject({ running: 0, waiting: 0, kvUsedBlocks: 0 });
  });
});

describe('BatchScheduler prefix cache', () => {
  const system = prompt(1000, 42);
  const ask = (salt: number): number[] => [...system, ...prompt(24, salt)];

  function prefillMsOfRepeat(prefixCaching: boolean): { ms: number; cached: number; hits: number } {
    const { s, runUntilIdle } = setup({ prefixCaching });
    s.submit({ promptTokens: ask(1), outputTokens: 2 });
    runUntilIdle();
    const second = s.submit({ promptTokens: ask(2), outputTokens: 2 });
    runUntilIdle();
    return { ms: (second.firstTokenAt ?? 0) - (second.admittedAt ?? 0), cached: second.cachedTokens, hits: s.snapshot().prefixCacheHitsTotal };
  }

  it('skips prefill for cached leading blocks of a repeated prefix', () => {
    const on = prefillMsOfRepeat(true);
    const off = prefillMsOfRepeat(false);
    expect(on.cached).toBe(992); // 62 whole blocks of the shared 1000 tokens
    expect(on.hits).toBe(992);
    expect(off.cached).toBe(0);
    expect(off.ms).toBeCloseTo(1024); // 1024 prompt tokens at 1000 tok/s
    expect(on.ms).toBeCloseTo(32); // only the 32 uncached tokens
  });

  it('always computes at least the last token of a fully cached prompt', () => {
    const { s, runUntilIdle } = setup({ prefixCaching: true });
    s.submit({ promptTokens: prompt(64), outputTokens: 1 });
    runUntilIdle();
    const again = s.submit({ promptTokens: prompt(64), outputTokens: 1 });
    runUntilIdle();
    expect(again.cachedTokens).toBe(48);
  });

  it('shares cached blocks between running sequences (KV counted once)', () => {
    const { clock, s, runUntilIdle } = setup({ prefixCaching: true });
    s.submit({ promptTokens: prompt(320), outputTokens: 1 });
    runUntilIdle();
    const a = s.submit({ promptTokens: [...prompt(320), 1], outputTokens: 100 });
    const b = s.submit({ promptTokens: [...prompt(320), 2], outputTokens: 100 });
    clock.t += 1;
    s.advance();
    expect(a.cachedTokens).toBe(320);
    expect(b.cachedTokens).toBe(320);
    // 20 shared prompt blocks + 7 private blocks each (1 + 100 tokens beyond the shared 320).
    expect(s.snapshot().kvUsedBlocks).toBe(20 + 7 + 7);
    runUntilIdle();
  });

  it('evicts released blocks least recently used first when space is needed', () => {
    // 10 blocks; A and B each take 4 prompt blocks (+1 output block).
    const { s, runUntilIdle } = setup({ prefixCaching: true, kvCapacityTokens: 160 });
    const A = prompt(64, 1);
    const B = prompt(64, 2);
    s.submit({ promptTokens: [...A, 9], outputTokens: 1 });
    runUntilIdle();
    s.submit({ promptTokens: [...B, 9], outputTokens: 1 });
    runUntilIdle();
    // C needs 8 blocks: 2 free + 6 evicted. A was released first, so A goes, then B's tail.
    s.submit({ promptTokens: prompt(120, 3), outputTokens: 8 });
    runUntilIdle();
    const a = s.submit({ promptTokens: [...A, 9], outputTokens: 1 });
    runUntilIdle();
    expect(a.cachedTokens).toBe(0);
  });
});

describe('BatchScheduler invariants (property)', () => {
  it('never exceeds maxRunning or KV capacity, admits FIFO, and delivers every token once in order', () => {
    const arrival = fc.record({ gapMs: fc.integer({ min: 0, max: 50 }), promptLen: fc.integer({ min: 1, max: 300 }), output: fc.integer({ min: 0, max: 40 }), family: fc.integer({ min: 0, max: 3 }) });
    fc.assert(
      fc.property(
        fc.array(arrival, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 20, max: 60 }),
        fc.boolean(),
        fc.integer({ min: 8, max: 200 }),
        (arrivals, maxRunning, kvBlocks, prefixCaching, maxBatchedTokens) => {
          const clock = new ManualClock();
          const config = { ...BASE, maxRunning, kvCapacityTokens: kvBlocks * 16, prefixCaching, maxBatchedTokens: Math.max(maxRunning, maxBatchedTokens), batchSlowdown: 0.05 };
          const s = new BatchScheduler(config, clock);
          const all: { stats: SequenceStats; tokens: number[]; doneCount: number }[] = [];
          const check = (): void => {
            const snap = s.snapshot();
            expect(snap.running).toBeLessThanOrEqual(maxRunning);
            expect(snap.kvUsedBlocks).toBeLessThanOrEqual(kvBlocks);
            expect(snap.kvUsedBlocks).toBeGreaterThanOrEqual(0);
          };
          let t = 0;
          for (const a of arrivals) {
            t += a.gapMs;
            // Step the clock to the arrival through every step end, checking as we go.
            for (let next = s.nextEventAt(); next !== undefined && next <= t; next = s.nextEventAt()) {
              clock.t = next;
              s.advance();
              check();
            }
            clock.t = t;
            const promptTokens = [...prompt(Math.min(a.promptLen, 64), a.family), ...prompt(Math.max(0, a.promptLen - 64), 100 + all.length)];
            if (Math.ceil((promptTokens.length + a.output) / 16) > kvBlocks) continue;
            const entry = { stats: undefined as unknown as SequenceStats, tokens: [] as number[], doneCount: 0 };
            entry.stats = s.submit({ promptTokens, outputTokens: a.output }, { onToken: (i) => entry.tokens.push(i), onDone: () => entry.doneCount++ });
            all.push(entry);
            check();
          }
          for (let next = s.nextEventAt(); next !== undefined; next = s.nextEventAt()) {
            clock.t = next;
            s.advance();
            check();
          }
          expect(s.snapshot()).toMatchObject({ running: 0, waiting: 0, kvUsedBlocks: 0 });
          let lastAdmitted = -Infinity;
          for (const e of all) {
            expect(e.stats.state).toBe('done');
            expect(e.doneCount).toBe(1);
            expect(e.tokens).toEqual(Array.from({ length: e.stats.outputTokens }, (_, i) => i));
            expect(e.stats.admittedAt ?? NaN).toBeGreaterThanOrEqual(lastAdmitted);
            lastAdmitted = e.stats.admittedAt ?? NaN;
            const uncached = e.stats.promptTokens - e.stats.cachedTokens;
            expect((e.stats.firstTokenAt ?? 0) - (e.stats.admittedAt ?? 0)).toBeGreaterThanOrEqual((uncached / config.prefillTps) * 1000 - 1e-6);
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
