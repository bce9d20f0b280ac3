import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Candidate } from './candidate';
import { loadCap } from './prefix-affinity';
import { DEFAULT_SCORER_WEIGHTS, estimatedLoad, estimatedOccupancy, runningScorer } from './scorers';
import { BALANCE_EPSILON, buildScorers, EndpointPicker } from './picker';

const seq = (...values: number[]) => {
  let i = 0;
  return { next: () => values[i++ % values.length] };
};
const cand = (id: string, over: Partial<Candidate> = {}): Candidate => ({
  id,
  models: ['m'],
  suspect: false,
  draining: false,
  breaker: 'closed',
  probeAvailable: false,
  inFlight: 0,
  ...over,
});
const picker = (rng = seq(0)) => new EndpointPicker(buildScorers(DEFAULT_SCORER_WEIGHTS), rng);

describe('EndpointPicker filters', () => {
  it.each([
    ['another model', cand('a', { models: ['other'] })],
    ['an open breaker', cand('a', { breaker: 'open' })],
    ['a half-open breaker whose probe is taken', cand('a', { breaker: 'half-open', probeAvailable: false })],
    ['a draining endpoint', cand('a', { draining: true })],
  ])('never picks %s', (_name, bad) => {
    const r = picker().pick({ model: 'm' }, [bad, cand('b', { inFlight: 50 })]);
    expect(r.ok && r.chosen.id).toBe('b');
  });

  it('lets a half-open breaker take its single probe', () => {
    const r = picker().pick({ model: 'm' }, [cand('a', { breaker: 'half-open', probeAvailable: true })]);
    expect(r.ok && r.chosen.id).toBe('a');
  });

  it('prefers endpoints on healthy nodes, but uses a suspect one when it is all there is', () => {
    const p = picker();
    const both = p.pick({ model: 'm' }, [cand('s', { suspect: true }), cand('h', { inFlight: 9 })]);
    expect(both.ok && both.chosen.id).toBe('h');
    const only = p.pick({ model: 'm' }, [cand('s', { suspect: true })]);
    expect(only.ok && only.chosen.id).toBe('s');
  });

  it('drops an endpoint whose scrapes go unanswered, but uses it when it is all there is', () => {
    const p = picker();
    const both = p.pick({ model: 'm' }, [cand('frozen', { scrapeHealth: 'unavailable' }), cand('busy', { inFlight: 50 })]);
    expect(both.ok && both.chosen.id).toBe('busy');
    const only = p.pick({ model: 'm' }, [cand('frozen', { scrapeHealth: 'unavailable' }), cand('shut', { breaker: 'open' })]);
    expect(only.ok && only.chosen.id).toBe('frozen');
  });

  it('says why nothing was picked', () => {
    expect(picker().pick({ model: 'm' }, [])).toMatchObject({ ok: false, reason: 'no-endpoints' });
    expect(picker().pick({ model: 'm' }, [cand('a', { breaker: 'open' })])).toMatchObject({ ok: false, reason: 'none-eligible' });
  });
});

describe('EndpointPicker scoring', () => {
  it('sends new requests away from an endpoint with a waiting queue', () => {
    const p = picker(seq(0, 0.5, 0.99));
    const busy = cand('busy', { load: { running: 4, waiting: 20, kvUsage: 0.5 } });
    const calm = cand('calm', { load: { running: 4, waiting: 0, kvUsage: 0.5 } });
    for (let i = 0; i < 50; i++) {
      const r = p.pick({ model: 'm' }, [busy, calm]);
      expect(r.ok && r.chosen.id).toBe('calm');
    }
  });

  it('sends the next request behind fewer requests waiting for their first output, over one where the rest just finished', () => {
    // Two replicas just ran their requests to the end together (a lockstep pair): "free" has
    // nothing running and one request already sent back to it, still in prefill; "decoding" runs
    // two sequences that have their first tokens. A request sent to "free" waits behind that
    // prefill; one sent to "decoding" only shares a step with two decoders.
    const scraped = { running: 0, waiting: 0, kvUsage: 0 };
    const free = cand('free', { load: scraped, inFlightAtScrape: 0, inFlight: 1, awaitingOutput: 1 });
    const decoding = cand('decoding', { load: { running: 2, waiting: 0, kvUsage: 0.1 }, inFlightAtScrape: 2, inFlight: 2, awaitingOutput: 0 });
    const r = picker().pick({ model: 'm' }, [free, decoding]);
    expect(r.ok && r.chosen.id).toBe('decoding');
    expect(r.ok && r.scores.map((s) => s.byScorer['awaiting-output'])).toEqual([0, 1]);
    // Without the router saying, every in-flight request counts as waiting.
    expect(picker().pick({ model: 'm' }, [cand('a', { inFlight: 3 }), cand('b', { inFlight: 1 })]).ok).toBe(true);
  });

  it('scores down an endpoint whose last scrape went unanswered', () => {
    const r = picker(seq(0.99)).pick({ model: 'm' }, [cand('suspect', { scrapeHealth: 'suspect' }), cand('ok', { scrapeHealth: 'ok' })]);
    expect(r.ok && r.chosen.id).toBe('ok');
    expect(r.ok && r.scores.map((s) => s.byScorer['scrape-health'])).toEqual([0.5, 1]);
  });

  it('with engine metrics absent, follows the local in-flight count', () => {
    const r = picker().pick({ model: 'm' }, [cand('a', { inFlight: 7 }), cand('b', { inFlight: 2 }), cand('c', { inFlight: 5 })]);
    expect(r.ok && r.chosen.id).toBe('b');
  });

  it('does not treat an unknown KV use as an empty cache', () => {
    const r = picker().pick({ model: 'm' }, [
      cand('unknown', { load: { waiting: 0, running: 1 } }),
      cand('known', { load: { waiting: 0, running: 1, kvUsage: 0.2 } }),
    ]);
    expect(r.ok && r.chosen.id).toBe('known');
  });

  /**
   * Picks `n` requests one after another between two scrapes (none finishes), acquiring each on
   * the chosen endpoint as the router does, and counts where they went.
   */
  function burst(start: Candidate[], n: number, weights: Readonly<Record<string, number>> = DEFAULT_SCORER_WEIGHTS): Record<string, number> {
    const cs = start.map((c) => ({ ...c }));
    const counts: Record<string, number> = Object.fromEntries(cs.map((c) => [c.id, 0]));
    const p = new EndpointPicker(buildScorers(weights), seq(0.1, 0.6, 0.3, 0.9, 0.5));
    for (let i = 0; i < n; i++) {
      const r = p.pick({ model: 'm' }, cs);
      if (!r.ok) throw new Error('nothing picked');
      counts[r.chosen.id]++;
      const chosen = cs.find((c) => c.id === r.chosen.id) as { inFlight: number; awaitingOutput?: number };
      chosen.inFlight++;
      if (chosen.awaitingOutput !== undefined) chosen.awaitingOutput++;
    }
    return counts;
  }

  it('counts what it sent since the last scrape, so the endpoint that looked emptiest then does not take every request until the next one', () => {
    // At the scrape, a had just emptied; the seven others each ran 2 and queued 1, all this router's
    // (the queued one has had no output yet).
    const scraped = (id: string, running: number, waiting: number, inFlight: number): Candidate =>
      cand(id, { inFlight, awaitingOutput: waiting, load: { running, waiting }, inFlightAtScrape: inFlight });
    const start = [scraped('a', 0, 0, 0), ...['b', 'c', 'd', 'e', 'f', 'g', 'h'].map((id) => scraped(id, 2, 1, 3))];
    const counts = burst(start, 16);
    // Fresh estimates: a catches up with the others (3 in flight), then the 16 spread evenly.
    expect(counts.a).toBeLessThanOrEqual(5);
    expect(Math.max(...Object.values(counts)) - Math.min(...Object.values(counts).slice(1))).toBeLessThanOrEqual(2);
    // The same picture without the in-flight count at the scrape, scored without the awaiting-output
    // scorer (the router before either), gave the old herding: a took more than 8 of the 16. Now
    // the estimates never read below this router's own requests and the balance cap holds a to
    // about its share (37 over 8 is 4.6 each, and a starts with none).
    const stale = start.map(({ inFlightAtScrape: _ignored, ...c }) => c);
    const { 'awaiting-output': _left, ...before } = DEFAULT_SCORER_WEIGHTS;
    expect(burst(stale, 16, before).a).toBeLessThanOrEqual(6);
  });

  it('estimates the load now from the scrape and what this router sent or saw finish since, never below 0, unknown kept unknown', () => {
    expect(estimatedLoad(cand('a', { inFlight: 5, inFlightAtScrape: 2, load: { running: 4, waiting: 1 } }))).toEqual({ running: 7, waiting: 4 });
    expect(estimatedLoad(cand('a', { inFlight: 0, inFlightAtScrape: 3, load: { running: 2, waiting: 1 } }))).toEqual({ running: 0, waiting: 0 });
    expect(estimatedLoad(cand('a', { inFlight: 5, inFlightAtScrape: 2, load: { kvUsage: 0.5 } }))).toEqual({});
    expect(estimatedLoad(cand('a', { inFlight: 3, load: { running: 4 } }))).toEqual({ running: 4 });
    expect(estimatedLoad(cand('a', { inFlight: 5 }))).toEqual({});
  });

  it('never estimates fewer running than this router has there beyond the estimated queue: the engine holds them all', () => {
    // Read at the engine before two requests were sent, counted here after: the scrape says 1, the
    // count at the scrape already held the two, so the delta adds nothing.
    const lagging = cand('a', { inFlight: 3, inFlightAtScrape: 3, load: { running: 1, waiting: 0 } });
    expect(estimatedLoad(lagging)).toEqual({ running: 3, waiting: 0 });
    expect(estimatedOccupancy(lagging)).toBe(3);
    // What the queue estimate holds is not counted as running too.
    expect(estimatedLoad(cand('a', { inFlight: 5, inFlightAtScrape: 3, load: { running: 0, waiting: 1 } }))).toEqual({ running: 2, waiting: 3 });
    // Without a count at the scrape, the floor still holds.
    expect(estimatedLoad(cand('a', { inFlight: 5, load: { running: 4 } }))).toEqual({ running: 5 });
  });

  /**
   * 16 clients in a closed loop over 8 equal replicas, as uniform-balance.e2e.ts runs them: each
   * request decodes for 20–22 ticks and has its first output after 1–2; its client sends the next
   * one 0–1 tick after it ends. Each replica is scraped every 20 ticks, each at its own phase; the
   * engine reads its figures when the scrape is sent, leaving out a request in its last tick (it
   * ends a request before the router sees its stream close), and the answer arrives `lag` ticks
   * later with the most requests the router had there in between (as the router records it:
   * apps/router ScrapeReading.inFlight). Returns the highest running count on any replica while at
   * least 14 of the 16 run (the e2e's steady samples). `random` gives values in [0, 1).
   */
  function closedLoop(random: () => number, lag: number): number {
    const picker = new EndpointPicker(buildScorers(DEFAULT_SCORER_WEIGHTS), { next: random });
    type Replica = {
      id: string;
      phase: number;
      requests: { end: number; firstOutput: number }[];
      scrape?: { engine: { running: number; waiting: number }; answerAt: number; peak: number };
      load?: { running: number; waiting: number };
      inFlightAtScrape?: number;
    };
    const replicas: Replica[] = Array.from({ length: 8 }, (_, i) => ({ id: `r${i}`, phase: Math.floor(random() * 20), requests: [] }));
    const nextSend = Array.from({ length: 16 }, (_, i) => i % 5);
    let highest = 0;
    for (let t = 0; t < 3_000; t++) {
      for (const r of replicas) {
        const before = r.requests.length;
        r.requests = r.requests.filter((q) => q.end > t);
        for (let k = r.requests.length; k < before; k++) nextSend.push(t + Math.floor(random() * 2));
        if ((t + r.phase) % 20 === 0) r.scrape = { engine: { running: r.requests.filter((q) => q.end > t + 1).length, waiting: 0 }, answerAt: t + lag, peak: r.requests.length };
        if (r.scrape?.answerAt === t) {
          r.load = r.scrape.engine;
          r.inFlightAtScrape = r.scrape.peak;
          r.scrape = undefined;
        }
      }
      for (let k = nextSend.length - 1; k >= 0; k--) {
        if (nextSend[k] > t) continue;
        nextSend.splice(k, 1);
        const cs = replicas.map((r) =>
          cand(r.id, { inFlight: r.requests.length, awaitingOutput: r.requests.filter((q) => q.firstOutput > t).length, load: r.load, inFlightAtScrape: r.inFlightAtScrape }),
        );
        const res = picker.pick({ model: 'm' }, cs);
        if (!res.ok) throw new Error('nothing picked');
        const chosen = replicas[cs.indexOf(res.chosen)];
        chosen.requests.push({ end: t + 20 + Math.floor(random() * 3), firstOutput: t + 1 + Math.floor(random() * 2) });
        if (chosen.scrape !== undefined) chosen.scrape.peak = Math.max(chosen.scrape.peak, chosen.requests.length);
      }
      const running = replicas.map((r) => r.requests.length);
      if (t > 100 && running.reduce((a, b) => a + b, 0) >= 14) highest = Math.max(highest, ...running);
    }
    return highest;
  }

  /** Uniform values in [0, 1) from fast-check (its doubles lean towards edge cases; these do not). */
  const uniformStream = fc.noShrink(fc.infiniteStream(fc.noBias(fc.integer({ min: 0, max: 0xffffffff }))));
  const fromStream = (values: Iterable<number>): (() => number) => {
    const it = values[Symbol.iterator]();
    return () => (it.next().value as number) / 0x100000000;
  };

  it.each([0, 2, 5, 19])('under steady uniform load never runs a replica above 1.25 × the mean + 1, the scrape answered %d ticks after the engine read it', (lag) => {
    // 16 over 8: the mean is 2 and the bound 3.5, so 3 at most. With the count when the answer
    // came instead of the peak, and estimates that could read below the router's own requests,
    // a lag of 5 ticks or more put a fourth request on a replica in 30 % of the runs or more.
    fc.assert(
      fc.property(uniformStream, (values) => closedLoop(fromStream(values), lag) === 3),
      { numRuns: 8 },
    );
  });

  it('never picks a candidate at or above the balance cap while one below exists, whatever the weights (property)', () => {
    const arbLoaded = fc.record({
      inFlight: fc.nat(12),
      awaitingOutput: fc.nat(3),
      load: fc.option(fc.record({ running: fc.nat(12), waiting: fc.nat(4), kvUsage: fc.double({ min: 0, max: 1, noNaN: true }) }), { nil: undefined }),
    });
    const arbWeights = fc.record({ queue: fc.integer({ min: 1, max: 9 }), 'awaiting-output': fc.integer({ min: 1, max: 9 }), 'kv-cache': fc.integer({ min: 1, max: 9 }), running: fc.integer({ min: 1, max: 9 }) });
    fc.assert(
      fc.property(fc.array(arbLoaded, { minLength: 1, maxLength: 10 }), arbWeights, (specs, weights) => {
        const cs = specs.map((x, i) => cand(`c${i}`, { ...x, awaitingOutput: Math.min(x.awaitingOutput, x.inFlight) }));
        const res = new EndpointPicker(buildScorers(weights), seq(0.5)).choose(cs);
        if (!res.ok) return false;
        const occupancy = cs.map(estimatedOccupancy);
        expect(res.cap).toBe(loadCap(occupancy, BALANCE_EPSILON));
        expect(occupancy[cs.indexOf(res.chosen)]).toBeLessThan(res.cap);
        // The best total among those under the cap.
        const best = Math.max(...res.scores.filter((_, i) => occupancy[i] < res.cap).map((x) => x.total));
        expect(res.scores[cs.indexOf(res.chosen)].total).toBeCloseTo(best, 9);
        return true;
      }),
    );
  });

  it('passes over a replica running 3 while others run 1, though every other one has a request in prefill', () => {
    // The scorers alone prefer "three": nothing of its own awaits output there (awaiting-output,
    // weight 3, against running and in-flight, 1 each). 15 + 1 over 8 → cap ⌈1.25 × 2⌉ = 3.
    const busy = cand('three', { inFlight: 3, awaitingOutput: 0, load: { running: 3, waiting: 0 }, inFlightAtScrape: 3 });
    const others = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((id, i) => cand(id, { inFlight: i < 5 ? 2 : 1, awaitingOutput: 1, load: { running: i < 5 ? 2 : 1, waiting: 0 }, inFlightAtScrape: i < 5 ? 2 : 1 }));
    const res = picker().choose([busy, ...others]);
    expect(res.ok && res.cap).toBe(3);
    expect(res.ok && res.chosen.id).not.toBe('three');
    expect(res.ok && res.scores[0].total).toBe(Math.max(...(res.ok ? res.scores.map((x) => x.total) : [])));
  });

  it.each([
    ['scraped running + waiting plus what was sent since, counted once', { inFlight: 5, inFlightAtScrape: 2, load: { running: 4, waiting: 1 } }, 8],
    ['never below 0', { inFlight: 0, inFlightAtScrape: 9, load: { running: 2, waiting: 1 } }, 0],
    ['waiting unknown: running alone', { inFlight: 1, inFlightAtScrape: 1, load: { running: 3 } }, 3],
    ['running unknown: the local in-flight count', { inFlight: 6, inFlightAtScrape: 2, load: { waiting: 9 } }, 6],
    ['no scrape: the local in-flight count', { inFlight: 4 }, 4],
  ] as const)('estimates occupancy: %s', (_what, over, want) => {
    expect(estimatedOccupancy(cand('a', over))).toBe(want);
  });

  it("gives ties to the earliest in the list when asked ('first'), never asking the randomness", () => {
    const cs = [cand('a'), cand('b', { inFlight: 1 }), cand('c'), cand('d')];
    const never = { next: (): number => { throw new Error('asked the randomness'); } };
    const r = new EndpointPicker(buildScorers(DEFAULT_SCORER_WEIGHTS), never).choose([cs[1], cs[2], cs[0], cs[3]], 'first');
    expect(r.ok && r.chosen.id).toBe('c');
  });

  it('breaks ties with the injected randomness', () => {
    const cs = [cand('a'), cand('b'), cand('c')];
    const picked = [0, 0.34, 0.67].map((v) => {
      const r = picker(seq(v)).pick({ model: 'm' }, cs);
      return r.ok ? r.chosen.id : undefined;
    });
    expect(picked).toEqual(['a', 'b', 'c']);
  });

  it('rejects unknown scorers and missing or bad weights, listing each', () => {
    expect(() => buildScorers({ queue: 1, nope: 2, running: 0, 'kv-cache': Number.NaN })).toThrowError(
      expect.objectContaining({
        problems: [
          expect.objectContaining({ path: 'scorers.nope', message: expect.stringContaining('unknown scorer') }),
          expect.objectContaining({ path: 'scorers.running' }),
          expect.objectContaining({ path: 'scorers.kv-cache' }),
        ],
      }),
    );
    expect(() => buildScorers({})).toThrow(/invalid scorer configuration/);
  });

  const arbCandidate = fc.record({
    id: fc.uuid(),
    models: fc.constant(['m']),
    suspect: fc.boolean(),
    draining: fc.boolean(),
    breaker: fc.constantFrom('closed' as const, 'open' as const, 'half-open' as const),
    probeAvailable: fc.boolean(),
    inFlight: fc.nat(100),
    load: fc.option(
      fc.record(
        { running: fc.nat(64), waiting: fc.nat(64), kvUsage: fc.double({ min: 0, max: 1, noNaN: true }) },
        { requiredKeys: [] },
      ),
      { nil: undefined },
    ),
    maxRunning: fc.option(fc.integer({ min: 1, max: 64 }), { nil: undefined }),
  });

  it('always picks an eligible endpoint and scores within [0, 1] (property)', () => {
    fc.assert(
      fc.property(fc.array(arbCandidate, { maxLength: 12 }), fc.double({ min: 0, max: 0.999, noNaN: true }), (cs, r) => {
        const p = picker(seq(r));
        const res = p.pick({ model: 'm' }, cs);
        const eligible = p.eligible({ model: 'm' }, cs);
        if (!res.ok) return eligible.length === 0;
        expect(eligible).toContain(res.chosen);
        expect(res.chosen.draining).toBe(false);
        expect(res.chosen.breaker === 'open').toBe(false);
        for (const s of res.scores) expect(s.total >= 0 && s.total <= 1 + 1e-12).toBe(true);
        // The best total among the candidates under the balance cap (see the property below).
        const underCap = res.scores.filter((_, i) => estimatedOccupancy(res.eligible[i]) < res.cap);
        const best = Math.max(...underCap.map((s) => s.total));
        expect(res.scores.find((s) => s.id === res.chosen.id)?.total).toBeCloseTo(best, 9);
        return true;
      }),
    );
  });
});

/** A vLLM replica: running from /metrics, no capacity reported. */
const vllm = (id: string, running: number): Candidate => cand(id, { load: { running, waiting: 0 } });
/** A llama.cpp replica: running and capacity from /slots. */
const llama = (id: string, running: number, capacity: number): Candidate => cand(id, { load: { running, capacity }, maxRunning: capacity });

const scores = (...cs: Candidate[]): Record<string, number> => Object.fromEntries(runningScorer.score(cs).map((s, i) => [cs[i].id, s]));

describe('runningScorer on a model served by vLLM and llama.cpp at once', () => {
  it('a llama.cpp replica with 4 of 4 slots busy scores worse than an idle vLLM replica', () => {
    const s = scores(llama('l', 4, 4), vllm('v', 0));
    expect(s.l).toBeLessThan(s.v);
    expect(s).toEqual({ l: 0, v: 1 });
  });

  it('a llama.cpp replica with 0 of 4 slots busy scores better than a vLLM replica running 30', () => {
    const s = scores(llama('l', 0, 4), vllm('v', 30));
    expect(s.l).toBeGreaterThan(s.v);
    expect(s).toEqual({ l: 1, v: 0 });
  });

  it('each llama.cpp replica by its own capacity; vLLM replicas against the largest of the known capacities and their own running', () => {
    // Known: 2/4 and 3/8. Unknown capacity taken as max(8, 6) = 8.
    const s = scores(llama('l4', 2, 4), llama('l8', 3, 8), vllm('v2', 2), vllm('v6', 6));
    expect(s.l4).toBeCloseTo(0.5, 12);
    expect(s.l8).toBeCloseTo(1 - 3 / 8, 12);
    expect(s.v2).toBeCloseTo(1 - 2 / 8, 12);
    expect(s.v6).toBeCloseTo(1 - 6 / 8, 12);
  });

  it('counts what this router sent since the scrape against the slots', () => {
    const s = scores(cand('l', { load: { running: 2, capacity: 4 }, maxRunning: 4, inFlight: 3, inFlightAtScrape: 1 }), vllm('v', 0));
    expect(s.l).toBe(0);
  });

  it('without a scraped running count, uses the local in-flight count against the capacity', () => {
    expect(scores(cand('l', { load: { capacity: 4 }, maxRunning: 4, inFlight: 1 }), vllm('v', 0)).l).toBeCloseTo(0.75, 12);
  });

  it('is unchanged where no capacity is known: min-max over running', () => {
    expect(scores(vllm('a', 5), vllm('b', 6), vllm('c', 7))).toEqual({ a: 1, b: 0.5, c: 0 });
  });

  it('is unchanged where every capacity is known: 1 − running/capacity, full or over full is 0', () => {
    expect(scores(llama('a', 1, 4), llama('b', 6, 4), llama('c', 0, 1))).toEqual({ a: 0.75, b: 0, c: 1 });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('treats a capacity of %d as unknown', (capacity) => {
    expect(scores(cand('x', { load: { running: 3 }, maxRunning: capacity }), vllm('v', 1))).toEqual({ x: 0, v: 1 });
  });

  it('scores every mix within [0, 1] (property)', () => {
    const arb = fc.record({
      running: fc.option(fc.nat(300), { nil: undefined }),
      capacity: fc.option(fc.integer({ min: 1, max: 512 }), { nil: undefined }),
      inFlight: fc.nat(300),
    });
    fc.assert(
      fc.property(fc.array(arb, { minLength: 1, maxLength: 12 }), (specs) => {
        const cs = specs.map((p, i) =>
          cand(String(i), { inFlight: p.inFlight, load: p.running === undefined ? {} : { running: p.running }, ...(p.capacity === undefined ? {} : { maxRunning: p.capacity }) }),
        );
        for (const v of runningScorer.score(cs)) expect(v >= 0 && v <= 1).toBe(true);
      }),
    );
  });
});
