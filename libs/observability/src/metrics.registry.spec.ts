import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, metricsHandler, PROMTOOL_REJECTED_DEFAULT_METRICS } from './metrics.registry';

/** Runs `promtool check metrics` on `text`. Fails (never skips) without promtool: CI installs the `prometheus` package. */
function promtoolCheck(text: string): { status: number | null; output: string } {
  const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (run.error) throw new Error(`promtool is needed for this test (apt-get install -y prometheus): ${run.error.message}`);
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('createMetricsRegistry', () => {
  it('exposes process metrics that pass promtool check metrics', async () => {
    const registry = createMetricsRegistry({ defaultLabels: { app: 'router' } });
    const text = await registry.metrics();
    expect(text).toContain('process_cpu_seconds_total');
    expect(text).toContain('nodejs_active_handles');
    expect(text).toContain('app="router"');
    for (const name of PROMTOOL_REJECTED_DEFAULT_METRICS) expect(text).not.toContain(`${name} `);
    expect(promtoolCheck(text)).toEqual({ status: 0, output: '' });
  });

  it('is a registry of its own, so apps and tests do not share series', async () => {
    const a = createMetricsRegistry({ processMetrics: false });
    const b = createMetricsRegistry({ processMetrics: false });
    new Counter({ name: 'llmgw_test_requests_total', help: 'Requests.', registers: [a] }).inc();
    expect(await a.metrics()).toContain('llmgw_test_requests_total 1');
    expect(await b.metrics()).toBe('\n');
  });

  it('promtool really rejects what was removed (the check is not vacuous)', () => {
    const bad = '# HELP nodejs_active_handles_total Total.\n# TYPE nodejs_active_handles_total gauge\nnodejs_active_handles_total 3\n';
    const result = promtoolCheck(bad);
    expect(result.status).not.toBe(0);
    expect(result.output).toContain('non-counter metrics should not have "_total" suffix');
  });
});

describe('metricsHandler', () => {
  it('answers with the text format and its content type', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    new Counter({ name: 'llmgw_test_total', help: 'Test.', registers: [registry] }).inc(2);
    const server = createServer((req, res) => void metricsHandler(registry)(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(registry.contentType);
      expect(await res.text()).toContain('llmgw_test_total 2');
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
