import type { Metric, Registry } from 'prom-client';

/** One exported sample as prom-client's Registry formats it. */
interface Sample {
  labels: Record<string, string>;
  value: number;
  metricName?: string;
}

const SEP = '\u0001';

function labelsOf(names: readonly string[], values: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  names.forEach((n, i) => (labels[n] = values[i]));
  return labels;
}

/** A bucket bound as a Prometheus `le` value: plain decimal, never exponent notation. */
function formatBound(b: number): string {
  const s = String(b);
  return s.includes('e') ? b.toFixed(12).replace(/\.?0+$/, '') : s;
}

/**
 * Shared part of the request-path metrics: fixed label names, one child per combination of
 * label values, found by a joined key — no per-call label hashing or validation. Registered in
 * a prom-client Registry like any other metric; formatting and escaping stay prom-client's.
 */
abstract class FastMetric<C> {
  readonly aggregator = 'sum';
  protected readonly children = new Map<string, { labels: Record<string, string>; child: C }>();

  constructor(
    readonly name: string,
    readonly help: string,
    protected readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  protected childFor(values: readonly string[]): C {
    const key = values.length === 1 ? values[0] : values.join(SEP);
    const found = this.children.get(key);
    if (found !== undefined) return found.child;
    if (values.length !== this.labelNames.length) throw new Error(`${this.name}: expected ${this.labelNames.length} label values, got ${values.length}`);
    const child = this.create();
    this.children.set(key, { labels: labelsOf(this.labelNames, values), child });
    return child;
  }

  protected abstract create(): C;

  /** Forgets every series. */
  reset(): void {
    this.children.clear();
  }

  /**
   * Forgets every series whose labels include all of `labels` (a subset of the label names,
   * e.g. `{ endpoint: 'r1' }`), whatever its other label values; returns how many it forgot.
   * Walks all series: meant for rare clean-up, not the request path.
   */
  removeMatching(labels: Readonly<Record<string, string>>): number {
    const wanted = Object.entries(labels);
    for (const [name] of wanted) if (!this.labelNames.includes(name)) throw new Error(`${this.name}: no label named ${JSON.stringify(name)}`);
    let removed = 0;
    for (const [key, series] of this.children) {
      if (!wanted.every(([name, value]) => series.labels[name] === value)) continue;
      this.children.delete(key);
      removed++;
    }
    return removed;
  }
}

/** A counter for the request path: `inc(labelValues, by)` in label-name order. */
export class FastCounter extends FastMetric<{ value: number }> {
  readonly type = 'counter';

  inc(values: readonly string[], by = 1): void {
    this.childFor(values).value += by;
  }

  protected create(): { value: number } {
    return { value: 0 };
  }

  /** The current value of one series, or undefined when it has never been incremented. */
  value(values: readonly string[]): number | undefined {
    return this.children.get(values.length === 1 ? values[0] : values.join(SEP))?.child.value;
  }

  async get(): Promise<{ name: string; help: string; type: 'counter'; aggregator: 'sum'; values: Sample[] }> {
    const values: Sample[] = [];
    for (const { labels, child } of this.children.values()) values.push({ labels, value: child.value });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

interface HistogramChild {
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** A histogram for the request path: `observe(labelValues, value)`; buckets are upper bounds, ascending. */
export class FastHistogram extends FastMetric<HistogramChild> {
  readonly type = 'histogram';
  private readonly bounds: readonly string[];

  constructor(name: string, help: string, labelNames: readonly string[], private readonly buckets: readonly number[], registry: Registry) {
    super(name, help, labelNames, registry);
    if (buckets.some((b, i) => i > 0 && b <= buckets[i - 1])) throw new Error(`${name}: buckets must ascend`);
    this.bounds = [...buckets.map(formatBound), '+Inf'];
  }

  observe(values: readonly string[], value: number): void {
    const child = this.childFor(values);
    const b = this.buckets;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    child.counts[i]++;
    child.sum += value;
    child.count++;
  }

  protected create(): HistogramChild {
    return { counts: new Float64Array(this.buckets.length + 1), sum: 0, count: 0 };
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: Sample[] }> {
    const values: Sample[] = [];
    for (const { labels, child } of this.children.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += child.counts[i];
        values.push({ labels: { le: this.bounds[i], ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      values.push({ labels, value: child.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: child.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
