import type { Candidate } from './candidate';

/**
 * Scores every candidate of one choice in [0, 1], higher is better. A scorer sees the whole
 * list so it can normalise; the runner clamps whatever it returns. Unknown engine metrics are
 * never read as 0: scorers fall back to the router's own in-flight count.
 */
export interface Scorer {
  readonly name: string;
  score(candidates: readonly Candidate[]): number[];
}

/** Lower is better → [0,1] by min-max over the candidates; all equal → 1 for everyone. */
export function invertedMinMax(values: readonly number[]): number[] {
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (!(max > min)) return values.map(() => 1);
  return values.map((v) => (max - v) / (max - min));
}

/** The figures of a candidate that say how loaded it is. */
export type LoadFigures = Pick<Candidate, 'inFlight' | 'load' | 'inFlightAtScrape' | 'awaitingOutput'>;

/**
 * The engine's running and waiting counts as they are likely to be now: the scraped figures plus
 * what this router has sent there since the scrape, minus what it saw finish (never below 0).
 * A scrape is up to an interval old; without this every choice in between sees the same
 * figures, and the endpoint that looked emptiest at the last scrape takes every request until
 * the next one (herding). What this router added is counted as both running and waiting:
 * without the engine's capacity it cannot know which, and erring towards "busier" is what
 * spreads the next choices. Unknown fields stay unknown.
 *
 * Running is never estimated below this router's own requests there that the waiting estimate
 * does not hold: the engine has them all. The scraped figures can trail them: the engine ends a
 * request before the router sees its stream close, and starts one after the router sent it, so
 * a scrape read while requests are replaced can count fewer of this router's requests than the
 * count it is compared with (Candidate.inFlightAtScrape). With one router the estimate is then
 * its in-flight count; with more, that plus what the scrape showed beyond it.
 */
export function estimatedLoad(c: Candidate): { readonly running?: number; readonly waiting?: number } {
  const load = c.load;
  if (load === undefined) return {};
  const delta = sentSinceScrape(c);
  const waiting = load.waiting === undefined ? undefined : Math.max(0, load.waiting + delta);
  return {
    ...(load.running === undefined ? {} : { running: Math.max(load.running + delta, c.inFlight - (waiting ?? 0), 0) }),
    ...(waiting === undefined ? {} : { waiting }),
  };
}

/** What this router sent to `c` since its scrape minus what it saw finish there; 0 without a count at the scrape. */
function sentSinceScrape(c: LoadFigures): number {
  return c.inFlightAtScrape === undefined ? 0 : c.inFlight - c.inFlightAtScrape;
}

/**
 * Requests on the engine as they are likely to be now, running and waiting together: the scraped
 * running + waiting plus what this router sent since the scrape (counted once, unlike
 * estimatedLoad's per-field view), and never fewer than this router's own requests there (the
 * engine holds them all; estimatedLoad says why the scraped figures can trail them). Without a
 * scraped running count, this router's own in-flight count: the one figure always known. The load
 * guard of prefix affinity compares it.
 */
export function estimatedOccupancy(c: LoadFigures): number {
  const running = c.load?.running;
  if (running === undefined) return c.inFlight;
  return Math.max(running + (c.load?.waiting ?? 0) + sentSinceScrape(c), c.inFlight);
}

/**
 * Engine waiting queue (as estimated now, see estimatedLoad). With no fresh `waiting` value the endpoint is judged by the requests
 * this router has in flight beyond the engine's known capacity (or all of them when capacity
 * is unknown) — a proxy that is honest about what we do know, never "idle".
 */
export const queueScorer: Scorer = {
  name: 'queue',
  score: (cs) =>
    invertedMinMax(
      cs.map((c) => estimatedLoad(c).waiting ?? (c.maxRunning !== undefined ? Math.max(0, c.inFlight - c.maxRunning) : c.inFlight)),
    ),
};

/** The candidate's capacity (sequences it runs at once) when known and usable (a finite number > 0). */
function knownCapacity(c: Candidate): number | undefined {
  return c.maxRunning !== undefined && Number.isFinite(c.maxRunning) && c.maxRunning > 0 ? c.maxRunning : undefined;
}

/**
 * Engine running sequences (as estimated now, see estimatedLoad; local in-flight without a
 * scraped figure) as the share of capacity in use, so that a model served by engines that report
 * their capacity (llama.cpp: its slots) and engines that do not (vLLM) is scored on one scale:
 * - when no candidate's capacity is known: running normalised across the candidates by min-max
 *   (least busy 1, busiest 0);
 * - otherwise each scores 1 − min(1, running / capacity). A candidate without a known capacity is
 *   taken to hold the largest known capacity or the highest running count among such candidates,
 *   whichever is more: it is never judged smaller than the biggest engine that says its size,
 *   and the busiest of them reads as full only when it runs at least that many.
 * An unknown capacity is a guess either way; the queue and KV scorers carry what vLLM does report.
 */
export const runningScorer: Scorer = {
  name: 'running',
  score: (cs) => {
    const running = cs.map((c) => estimatedLoad(c).running ?? c.inFlight);
    const capacity = cs.map(knownCapacity);
    const known = capacity.filter((n): n is number => n !== undefined);
    if (known.length === 0) return invertedMinMax(running);
    const unknownRunning = running.filter((_, i) => capacity[i] === undefined);
    const assumed = Math.max(...known, ...unknownRunning);
    return running.map((r, i) => 1 - Math.min(1, r / (capacity[i] ?? assumed)));
  },
};

/**
 * KV-cache headroom: 1 − kvUsage. An endpoint whose KV use is unknown gets half the lowest score
 * any candidate with a known value got (0.5 when nobody knows), so ignorance never wins by
 * looking empty.
 */
export const kvCacheScorer: Scorer = {
  name: 'kv-cache',
  score: (cs) => {
    const known = cs.map((c) => (c.load?.kvUsage === undefined ? undefined : 1 - Math.min(1, Math.max(0, c.load.kvUsage))));
    const knownValues = known.filter((v): v is number => v !== undefined);
    const fallback = knownValues.length > 0 ? Math.min(...knownValues) / 2 : 0.5;
    return known.map((v) => v ?? fallback);
  },
};

/** Requests this router has in flight on each endpoint (always known locally). */
export const inFlightScorer: Scorer = {
  name: 'in-flight',
  score: (cs) => invertedMinMax(cs.map((c) => c.inFlight)),
};

/**
 * Requests ahead of a new request's first token on each endpoint, fewer is better: the engine's
 * queue at its last fresh scrape (every router's requests) plus this router's requests there that
 * have had no output yet (queued or in prefill since; see Candidate.awaitingOutput; some of them
 * were in that queue too, which errs towards busier). A request's time to first token is its wait
 * behind these plus its own prefill, while a sequence already decoding costs it only a step's
 * share. Without this, least-load sent the next request to the replica whose requests had just
 * ended together, their successors arrived there together, and the replica's prefills lined up
 * one behind the other on every turn (bench:routing "random", least-load 0.76× round-robin).
 */
export const awaitingOutputScorer: Scorer = {
  name: 'awaiting-output',
  score: (cs) => invertedMinMax(cs.map((c) => (c.load?.waiting ?? 0) + (c.awaitingOutput ?? c.inFlight))),
};

/** Scrape health: 1 while scrapes answer, 0.5 once one has failed (suspect), 0 when unavailable. */
export const scrapeHealthScorer: Scorer = {
  name: 'scrape-health',
  score: (cs) => cs.map((c) => (c.scrapeHealth === undefined || c.scrapeHealth === 'ok' ? 1 : c.scrapeHealth === 'suspect' ? 0.5 : 0)),
};

/** Every scorer the router can be configured with, by name. */
export const SCORERS: Readonly<Record<string, Scorer>> = {
  [queueScorer.name]: queueScorer,
  [runningScorer.name]: runningScorer,
  [kvCacheScorer.name]: kvCacheScorer,
  [inFlightScorer.name]: inFlightScorer,
  [awaitingOutputScorer.name]: awaitingOutputScorer,
  [scrapeHealthScorer.name]: scrapeHealthScorer,
};

/**
 * Default weights: requests waiting for their first output (the engine's queue, and this
 * router's requests not yet answered) dominate, then KV headroom and scrape health, then running
 * and local in-flight.
 */
export const DEFAULT_SCORER_WEIGHTS: Readonly<Record<string, number>> = {
  queue: 3,
  'awaiting-output': 3,
  'kv-cache': 2,
  running: 1,
  'in-flight': 1,
  'scrape-health': 2,
};
