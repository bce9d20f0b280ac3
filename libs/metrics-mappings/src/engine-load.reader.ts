import type { EngineKind, EngineLoad, MetricMapping } from '@llmgw/domain';
import { resolveMapping } from './engine-mapping.registry';
import type { SlotsLoad } from './llama-slots.parser';
import { parsePrometheusText, type MetricFamily, type MetricSample } from './prometheus-text.parser';

export interface ReadLoadOptions {
  /**
   * The served model name this endpoint is read for. When the mapping has a `modelLabel` and
   * the metric's series carry that label, only series whose label equals it count.
   */
  readonly modelName?: string;
}

type FamilyIndex = ReadonlyMap<string, MetricFamily>;

/** The series named `name`: found in its own family or in the histogram/summary it belongs to. */
function seriesNamed(index: FamilyIndex, name: string): readonly MetricSample[] {
  let family = index.get(name);
  if (family === undefined) {
    const m = /^(.*)_(sum|count|bucket)$/.exec(name);
    if (m !== null) family = index.get(m[1]);
  }
  if (family === undefined) return [];
  const out: MetricSample[] = [];
  for (const s of family.samples) if (s.name === name) out.push(s);
  return out;
}

/**
 * Keeps the series for `modelName` when a filter applies. A filter applies when a model name
 * and label are given and at least one series carries the label; series of an engine that does
 * not label by model are all kept (the label cannot tell them apart).
 */
function forModel(series: readonly MetricSample[], label: string | undefined, modelName: string | undefined): readonly MetricSample[] {
  if (label === undefined || label === '' || modelName === undefined) return series;
  if (!series.some((s) => Object.prototype.hasOwnProperty.call(s.labels, label))) return series;
  return series.filter((s) => Object.prototype.hasOwnProperty.call(s.labels, label) && s.labels[label] === modelName);
}

/** Sum of the series; undefined when there are none or any is not a finite non-negative number. */
function sumCount(series: readonly MetricSample[]): number | undefined {
  if (series.length === 0) return undefined;
  let sum = 0;
  for (const s of series) {
    if (!Number.isFinite(s.value) || s.value < 0) return undefined;
    sum += s.value;
  }
  return sum;
}

/** Mean of fractions, clamped to at most 1; undefined when none, or any is NaN, ±Inf or negative. */
function meanFraction(series: readonly MetricSample[]): number | undefined {
  if (series.length === 0) return undefined;
  let sum = 0;
  for (const s of series) {
    if (!Number.isFinite(s.value) || s.value < 0) return undefined;
    sum += s.value;
  }
  return Math.min(1, sum / series.length);
}

/**
 * Reads an engine's load from a scrape (text or parsed families) with a resolved mapping.
 *
 * - `running`/`waiting`: the sum of the matching series — vLLM v1 exports one series per
 *   engine core (`engine` label), and without a model filter every served name counts.
 * - `kvUsage`: the first name in `mapping.kvUsage` that has matching series wins; the value is
 *   their mean (each engine core reports the fraction of its own, equally sized cache), clamped
 *   to ≤ 1 against rounding.
 * - Absent stays absent: a blank mapping field, a missing family, no matching series, or any
 *   NaN/±Inf/negative value in the set gives `undefined` — never 0. Undefined fields are
 *   omitted from the result. Throws PrometheusParseError when given unparsable text.
 */
export function readLoad(input: string | readonly MetricFamily[], mapping: MetricMapping, opts: ReadLoadOptions = {}): EngineLoad {
  const families = typeof input === 'string' ? parsePrometheusText(input) : input;
  const index = new Map<string, MetricFamily>();
  for (const f of families) index.set(f.name, f);
  const pick = (name: string | undefined): readonly MetricSample[] =>
    name === undefined || name === '' ? [] : forModel(seriesNamed(index, name), mapping.modelLabel, opts.modelName);

  const load: EngineLoad = {};
  const running = sumCount(pick(mapping.running));
  if (running !== undefined) load.running = running;
  const waiting = sumCount(pick(mapping.waiting));
  if (waiting !== undefined) load.waiting = waiting;
  for (const name of mapping.kvUsage ?? []) {
    const series = pick(name);
    if (series.length === 0) continue;
    const kv = meanFraction(series);
    if (kv !== undefined) load.kvUsage = kv;
    break;
  }
  return load;
}

/** Parses `text` and reads it with `engine`'s mapping (after `override`, see resolveMapping). */
export function parseAndRead(text: string, engine: EngineKind, override?: MetricMapping, opts?: ReadLoadOptions): EngineLoad {
  return readLoad(parsePrometheusText(text), resolveMapping(engine, override), opts);
}

/**
 * Whether an endpoint's /slots should be read beside its /metrics reading: llama.cpp only, and
 * only when that reading has no KV usage (current builds dropped the gauge, so /slots is the one
 * figure of how full the engine is).
 */
export function wantsSlots(engine: EngineKind, load: EngineLoad): boolean {
  return engine === 'llamacpp' && load.kvUsage === undefined;
}

/** `load` with /slots' figures added: `capacity` always, `running` only where /metrics had none. */
export function withSlots(load: EngineLoad, slots: SlotsLoad): EngineLoad {
  return { ...load, running: load.running ?? slots.running, capacity: slots.capacity };
}
