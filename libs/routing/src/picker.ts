import { DomainError, ErrorCode, type Problem, type Rng } from '@llmgw/domain';
import type { Candidate, PickRequest } from './candidate';
import { DEFAULT_FILTERS, type Filter } from './filters';
import { loadCap } from './prefix-affinity';
import { estimatedOccupancy, SCORERS, type Scorer } from './scorers';

export interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

/**
 * Turns `{scorerName: weight}` into scorers. Unknown names and weights that are not finite
 * positive numbers are configuration errors, all listed at once (path `scorers.<name>`).
 */
export function buildScorers(weights: Readonly<Record<string, unknown>>): WeightedScorer[] {
  const problems: Problem[] = [];
  const out: WeightedScorer[] = [];
  for (const [name, weight] of Object.entries(weights)) {
    const scorer = SCORERS[name];
    if (!scorer) problems.push({ path: `scorers.${name}`, message: `unknown scorer (known: ${Object.keys(SCORERS).join(', ')})` });
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0) {
      problems.push({ path: `scorers.${name}`, message: `weight must be a positive number, got ${JSON.stringify(weight)}` });
    }
    if (scorer && typeof weight === 'number' && Number.isFinite(weight) && weight > 0) out.push({ scorer, weight });
  }
  if (out.length === 0 && problems.length === 0) problems.push({ path: 'scorers', message: 'at least one scorer is required' });
  if (problems.length) throw new DomainError(ErrorCode.InvalidArgument, 'invalid scorer configuration', problems);
  return out;
}

/** One candidate's scores: weighted total in [0, 1] and each scorer's clamped value. */
export interface CandidateScore {
  readonly id: string;
  readonly total: number;
  readonly byScorer: Readonly<Record<string, number>>;
}

export type PickResult =
  | {
      readonly ok: true;
      readonly chosen: Candidate;
      readonly eligible: readonly Candidate[];
      /** Each eligible candidate's scores, in `eligible`'s order (those at or over the cap too). */
      readonly scores: readonly CandidateScore[];
      /** The balance cap of this choice (see BALANCE_EPSILON): only candidates below it were chosen from. */
      readonly cap: number;
    }
  | { readonly ok: false; readonly reason: 'no-endpoints' | 'none-eligible'; readonly eligible: readonly Candidate[] };

const clamp01 = (v: number): number => (Number.isFinite(v) ? Math.min(1, Math.max(0, v)) : 0);

/**
 * How far above the mean the weighted choice may take a replica: the request goes to a candidate
 * whose estimated occupancy (see estimatedOccupancy) is below ⌈(1 + ε) × the mean⌉, the request
 * counted in the mean (loadCap, the bounded loads prefix affinity's guard uses too). The least
 * occupied candidate is always below it. 0.25 is #14's bound for uniform load (no replica above
 * 1.25 × the mean + 1).
 */
export const BALANCE_EPSILON = 0.25;

/**
 * Chooses an endpoint: filters → weighted scorers → the best total among the candidates below
 * the balance cap (BALANCE_EPSILON), ties broken by the injected Rng or by list order (see
 * choose). Deterministic for equal inputs and Rng sequence.
 */
export class EndpointPicker {
  private readonly weightSum: number;

  constructor(
    private readonly scorers: readonly WeightedScorer[],
    private readonly rng: Rng,
    private readonly filters: readonly Filter[] = DEFAULT_FILTERS,
  ) {
    this.weightSum = scorers.reduce((s, w) => s + w.weight, 0);
  }

  /** Applies only the filters (admission needs the eligible set before scoring). */
  eligible(request: PickRequest, candidates: readonly Candidate[]): readonly Candidate[] {
    let cs = candidates;
    for (const f of this.filters) cs = f.apply(request, cs);
    return cs;
  }

  pick(request: PickRequest, candidates: readonly Candidate[]): PickResult {
    if (candidates.length === 0) return { ok: false, reason: 'no-endpoints', eligible: [] };
    const eligible = this.eligible(request, candidates);
    if (eligible.length === 0) return { ok: false, reason: 'none-eligible', eligible };
    return this.choose(eligible);
  }

  /**
   * Scores an already filtered, non-empty list and picks the best of those below the balance cap
   * (see BALANCE_EPSILON). The scorers weigh what makes a request's answer come sooner (requests
   * ahead of its first token, KV room, running sequences), and a replica can be best on all of
   * them but one and still run the most sequences: with every other replica just sent a request
   * that is still in prefill, the weights alone put a fourth on a replica running three while
   * others ran one (picker.spec.ts, the closed loop). The cap keeps that from happening whatever
   * the weights. Equal best totals go to the injected randomness (`ties` 'random': routers that
   * see the same figures do not all pick the same replica) or to the earliest in the list
   * ('first': a prefix-affinity cold key's list is in its rendezvous order, so on a tie it goes
   * home, where its later requests will go, and every router agrees).
   */
  choose(eligible: readonly Candidate[], ties: 'random' | 'first' = 'random'): PickResult {
    const totals = new Array<number>(eligible.length).fill(0);
    const byScorer: Record<string, number>[] = eligible.map(() => ({}));
    for (const { scorer, weight } of this.scorers) {
      const values = scorer.score(eligible);
      for (let i = 0; i < eligible.length; i++) {
        const v = clamp01(values[i]);
        byScorer[i][scorer.name] = v;
        totals[i] += (v * weight) / this.weightSum;
      }
    }
    const occupancy = eligible.map(estimatedOccupancy);
    const cap = loadCap(occupancy, BALANCE_EPSILON);
    let best = -Infinity;
    for (let i = 0; i < totals.length; i++) if (occupancy[i] < cap && totals[i] > best) best = totals[i];
    const top: number[] = [];
    for (let i = 0; i < totals.length; i++) if (occupancy[i] < cap && best - totals[i] <= 1e-9) top.push(i);
    const index = top.length === 1 || ties === 'first' ? top[0] : top[Math.min(top.length - 1, Math.floor(this.rng.next() * top.length))];
    const scores = eligible.map((c, i) => ({ id: c.id, total: totals[i], byScorer: byScorer[i] }));
    return { ok: true, chosen: eligible[index], eligible, scores, cap };
  }
}
