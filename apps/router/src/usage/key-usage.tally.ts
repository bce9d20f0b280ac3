import type { TokenUsage } from '../tenancy/response-usage';

/** Requests and tokens of one key on one model in one UTC hour. */
export interface KeyUsageCount {
  readonly key: string;
  readonly model: string;
  /** Start of the hour, ms since the epoch. */
  readonly hour: number;
  readonly requests: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

const HOUR_MS = 3_600_000;

/**
 * What this router's keyed requests used since its last report that the controller took, per
 * key, model and hour. A report that fails puts its counts back, so nothing is lost while no
 * controller answers (a report the controller wrote but whose answer was lost is counted twice;
 * that is the trade for never dropping usage).
 */
export class KeyUsageTally {
  private counts = new Map<string, { key: string; model: string; hour: number; requests: number; promptTokens: number; completionTokens: number }>();

  add(key: string, model: string, usage: TokenUsage, at: number): void {
    this.merge({ key, model, hour: at - (at % HOUR_MS), requests: 1, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens });
  }

  /** Every count, leaving the tally empty. */
  take(): KeyUsageCount[] {
    const out = [...this.counts.values()];
    this.counts = new Map();
    return out;
  }

  /** Counts a failed report carried, back into the tally. */
  putBack(counts: readonly KeyUsageCount[]): void {
    for (const c of counts) this.merge(c);
  }

  private merge(c: KeyUsageCount): void {
    const id = `${c.hour}\u0000${c.key}\u0000${c.model}`;
    const have = this.counts.get(id);
    if (have === undefined) this.counts.set(id, { ...c });
    else {
      have.requests += c.requests;
      have.promptTokens += c.promptTokens;
      have.completionTokens += c.completionTokens;
    }
  }
}
