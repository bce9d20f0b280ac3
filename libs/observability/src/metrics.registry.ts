import type { IncomingMessage, ServerResponse } from 'node:http';
import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * prom-client's default metrics that `promtool check metrics` rejects: gauges named `*_total`,
 * which Prometheus reserves for counters. Their per-type siblings without the suffix
 * (`nodejs_active_handles` etc.) carry the same information, so these are dropped.
 */
export const PROMTOOL_REJECTED_DEFAULT_METRICS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
] as const;

/** Options for {@link createMetricsRegistry}. */
export interface MetricsRegistryOptions {
  /** Labels on every series, e.g. `{ app: 'router' }`. */
  defaultLabels?: Record<string, string>;
  /** Register process and Node.js runtime metrics (default true). */
  processMetrics?: boolean;
}

/**
 * A metric family written straight to the text format when scraped, for families with very many
 * series (one per GPU of a large fleet). prom-client keeps every series as a labels object under
 * a key string and renders each through several arrays and strings; at tens of thousands of
 * series a scrape allocates tens of MB that live through the whole scrape. A text family writes
 * one line per sample from a label string its owner renders once (see {@link promLabels}).
 */
export interface TextFamily {
  /** Metric name, e.g. `llmgw_cluster_gpu_memory_used_bytes`. */
  readonly name: string;
  readonly help: string;
  readonly type: 'gauge';
  /**
   * Called once per scrape: `sample(labels, value)` for every series, `labels` as
   * {@link promLabels} renders them (no braces). A family with no samples writes its HELP and
   * TYPE lines only, as prom-client does.
   */
  collect(sample: (labels: string, value: number) => void): void;
}

/** `a="x",b="y"`: label pairs in the text format, values escaped; names must be valid label names. */
export function promLabels(labels: Readonly<Record<string, string>>): string {
  let out = '';
  for (const [name, value] of Object.entries(labels)) {
    out += `${out === '' ? '' : ','}${name}="${value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`;
  }
  return out;
}

/**
 * A prom-client registry that also writes {@link TextFamily} families, after the others, in
 * the same format (default labels included). Everything else is prom-client's.
 */
export class MetricsRegistry extends Registry {
  private readonly textFamilies: TextFamily[] = [];
  private defaultLabelText = '';

  /** Adds a family; its name must not be registered otherwise. */
  registerTextFamily(family: TextFamily): void {
    if (this.getSingleMetric(family.name) !== undefined || this.textFamilies.some((f) => f.name === family.name)) {
      throw new Error(`A metric with the name ${family.name} has already been registered.`);
    }
    this.textFamilies.push(family);
  }

  override setDefaultLabels(labels: object): void {
    super.setDefaultLabels(labels);
    this.defaultLabelText = promLabels(labels as Record<string, string>);
  }

  override async metrics(): Promise<string> {
    const text = await super.metrics();
    if (this.textFamilies.length === 0) return text;
    // prom-client separates families with a blank line and ends with '\n' (Prometheus), or with
    // '\n' and ends with '\n# EOF\n' (OpenMetrics); it writes '\n' alone (Prometheus) or
    // '\n# EOF\n' when it has no families. Every line goes into one array joined once, so a
    // large scrape builds its text once rather than per family and again for the whole.
    const open = (this.contentType as string) === Registry.OPENMETRICS_CONTENT_TYPE;
    const head = open ? text.slice(0, -'# EOF\n'.length) : text;
    const lines: string[] = [];
    if (head !== '\n') lines.push(head.slice(0, -1));
    for (const family of this.textFamilies) {
      if (lines.length > 0 && !open) lines.push('');
      this.render(family, lines);
    }
    if (open) lines.push('# EOF');
    lines.push('');
    return lines.join('\n');
  }

  private render(family: TextFamily, lines: string[]): void {
    lines.push(`# HELP ${family.name} ${family.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${family.name} ${family.type}`);
    const defaults = this.defaultLabelText;
    family.collect((labels, value) => {
      const all = defaults === '' ? labels : labels === '' ? defaults : `${labels},${defaults}`;
      lines.push(`${family.name}${all === '' ? '' : `{${all}}`} ${formatValue(value)}`);
    });
  }
}

/** A sample value as prom-client writes it. */
function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'Nan';
  if (!Number.isFinite(value)) return value > 0 ? '+Inf' : '-Inf';
  return String(value);
}

/**
 * A fresh registry (never prom-client's global one) with the process metrics registered, in a
 * form that passes `promtool check metrics`. Each app owns one and passes it around.
 */
export function createMetricsRegistry(options: MetricsRegistryOptions = {}): MetricsRegistry {
  const registry = new MetricsRegistry();
  if (options.defaultLabels) registry.setDefaultLabels(options.defaultLabels);
  if (options.processMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    for (const name of PROMTOOL_REJECTED_DEFAULT_METRICS) registry.removeSingleMetric(name);
  }
  return registry;
}

/** An HTTP handler answering GET with the registry in the Prometheus text format (500 with a line of text if collecting fails). */
export function metricsHandler(registry: Registry): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (_req, res) => {
    try {
      const body = await registry.metrics();
      res.statusCode = 200;
      res.setHeader('Content-Type', registry.contentType);
      res.end(body);
    } catch (error) {
      res.statusCode = 500;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end(`collecting metrics failed: ${error instanceof Error ? error.message : String(error)}\n`);
    }
  };
}
