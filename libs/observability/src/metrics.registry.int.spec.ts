import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry, type RegistryContentType } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetricsRegistry, metricsHandler, promLabels, PROMTOOL_REJECTED_DEFAULT_METRICS } from './metrics.registry';

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

describe('MetricsRegistry text families', () => {
  const series = [
    { node: 'node-1', gpu: '0', gpu_class: 'H100-80GB', value: 0.25 },
    { node: 'node-"2"', gpu: '1', gpu_class: 'back\\slash\nnew line', value: 80e9 },
    { node: 'node-3', gpu: '7', gpu_class: 'A100', value: Number.POSITIVE_INFINITY },
  ];

  /** The same series twice: as a prom-client Gauge in one registry, as a text family in another. */
  async function both(options: { defaultLabels?: Record<string, string>; openMetrics?: boolean; before?: boolean }) {
    const viaGauge = createMetricsRegistry({ processMetrics: false, ...(options.defaultLabels && { defaultLabels: options.defaultLabels }) });
    const viaText = createMetricsRegistry({ processMetrics: false, ...(options.defaultLabels && { defaultLabels: options.defaultLabels }) });
    if (options.openMetrics) for (const r of [viaGauge, viaText]) (r as unknown as Registry<RegistryContentType>).setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    if (options.before) for (const r of [viaGauge, viaText]) new Counter({ name: 'llmgw_test_before_total', help: 'Before.', registers: [r] }).inc(3);
    const gauge = new Gauge({ name: 'llmgw_test_gpu_value', help: 'Per GPU\\ value\nsecond line.', labelNames: ['node', 'gpu', 'gpu_class'], registers: [viaGauge] });
    for (const { value, ...labels } of series) gauge.set(labels, value);
    viaText.registerTextFamily({
      name: 'llmgw_test_gpu_value',
      help: 'Per GPU\\ value\nsecond line.',
      type: 'gauge',
      collect: (sample) => {
        for (const { value, ...labels } of series) sample(promLabels(labels), value);
      },
    });
    return { gauge: await viaGauge.metrics(), text: await viaText.metrics() };
  }

  it.each([
    { name: 'alone', options: {} },
    { name: 'after other families', options: { before: true } },
    { name: 'with default labels', options: { defaultLabels: { app: 'controller' }, before: true } },
    { name: 'in OpenMetrics', options: { openMetrics: true, before: true } },
  ])('writes exactly what prom-client writes for the same gauge ($name)', async ({ options }) => {
    const { gauge, text } = await both(options);
    expect(text).toBe(gauge);
    expect(text).toContain('gpu_class="back\\\\slash\\nnew line"');
  });

  it('passes promtool check metrics', async () => {
    const { text } = await both({ before: true, defaultLabels: { app: 'controller' } });
    expect(promtoolCheck(text)).toEqual({ status: 0, output: '' });
  });

  it('writes HELP and TYPE only for a family without samples, and refuses a name taken', () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    new Gauge({ name: 'llmgw_test_taken', help: 'Taken.', registers: [registry] });
    const family = { name: 'llmgw_test_empty', help: 'Empty.', type: 'gauge' as const, collect: () => undefined };
    registry.registerTextFamily(family);
    expect(() => registry.registerTextFamily(family)).toThrow(/already been registered/);
    expect(() => registry.registerTextFamily({ ...family, name: 'llmgw_test_taken' })).toThrow(/already been registered/);
    return expect(registry.metrics()).resolves.toMatch(/# HELP llmgw_test_empty Empty\.\n# TYPE llmgw_test_empty gauge\n$/);
  });
});
