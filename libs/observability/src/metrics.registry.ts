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
 * A fresh registry (never prom-client's global one) with the process metrics registered, in a
 * form that passes `promtool check metrics`. Each app owns one and passes it around.
 */
export function createMetricsRegistry(options: MetricsRegistryOptions = {}): Registry {
  const registry = new Registry();
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
