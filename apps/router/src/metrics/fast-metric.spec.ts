import { promtoolCheckMetrics } from '@llmgw/testing';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FastCounter, FastHistogram } from './fast-metric';

describe('FastCounter and FastHistogram', () => {
  it('expose exactly what prom-client’s own Counter and Histogram would, and promtool accepts it', async () => {
    const fast = new Registry();
    const reference = new Registry();
    const fc = new FastCounter('t_requests_total', 'Requests.', ['model', 'status'], fast);
    const rc = new Counter({ name: 't_requests_total', help: 'Requests.', labelNames: ['model', 'status'], registers: [reference] });
    const buckets = [0.00005, 0.001, 0.5, 2];
    const fh = new FastHistogram('t_duration_seconds', 'Duration.', ['model'], buckets, fast);
    const rh = new Histogram({ name: 't_duration_seconds', help: 'Duration.', labelNames: ['model'], buckets, registers: [reference] });
    const none = new FastHistogram('t_overhead_seconds', 'Overhead.', [], buckets, fast);
    const rnone = new Histogram({ name: 't_overhead_seconds', help: 'Overhead.', buckets, registers: [reference] });

    const models = ['m1', 'odd "name"\\with\nnewline'];
    for (let i = 0; i < 50; i++) {
      const model = models[i % 2];
      const status = i % 3 === 0 ? '200' : '429';
      fc.inc([model, status]);
      rc.inc({ model, status });
      const v = (i * 0.37) % 3;
      fh.observe([model], v);
      rh.observe({ model }, v);
      none.observe([], v / 1000);
      rnone.observe(v / 1000);
    }
    fc.inc(['m1', '200'], 5);
    rc.inc({ model: 'm1', status: '200' }, 5);

    const text = await fast.metrics();
    // Same samples; bound formatting may differ only in spelling (5e-05 vs 0.00005).
    const normalise = (t: string): string[] => t.replace(/le="5e-05"/g, 'le="0.00005"').split('\n').sort();
    expect(normalise(text)).toEqual(normalise(await reference.metrics()));
    expect(text).toContain('le="0.00005"');
    expect(promtoolCheckMetrics(text)).toEqual({ status: 0, output: '' });
    expect(fc.value(['m1', '200'])).toBe(14);
    expect(fc.value(['m2', '200'])).toBeUndefined();
  });

  it('removeMatching forgets every series carrying one label value, whatever the other labels, and nothing else', async () => {
    const r = new Registry();
    const c = new FastCounter('t_choices_total', 'Choices.', ['model', 'endpoint'], r);
    const h = new FastHistogram('t_latency_seconds', 'Latency.', ['endpoint', 'model'], [0.1, 1], r);
    for (const model of ['m1', 'm2', 'gone']) {
      for (const endpoint of ['gone', 'kept', 'gone2']) {
        c.inc([model, endpoint]);
        h.observe([endpoint, model], 0.5);
      }
    }

    expect(c.removeMatching({ endpoint: 'gone' })).toBe(3);
    expect(h.removeMatching({ endpoint: 'gone' })).toBe(3);
    const text = await r.metrics();
    // Only the `endpoint` label is matched: model="gone" stays, and so does an id that merely starts alike.
    expect(text).not.toMatch(/endpoint="gone"/);
    expect(text.match(/^t_choices_total\{/gm)).toHaveLength(6);
    expect(text.match(/^t_latency_seconds_count\{/gm)).toHaveLength(6);
    expect(c.value(['gone', 'kept'])).toBe(1);
    expect(c.value(['m1', 'gone2'])).toBe(1);
    expect(c.value(['m1', 'gone'])).toBeUndefined();
    expect(promtoolCheckMetrics(text)).toEqual({ status: 0, output: '' });

    // Several labels must all match; none matching removes nothing; a series that comes back starts from zero.
    expect(c.removeMatching({ model: 'm2', endpoint: 'kept' })).toBe(1);
    expect(c.value(['m2', 'gone2'])).toBe(1);
    expect(c.removeMatching({ endpoint: 'never-seen' })).toBe(0);
    c.inc(['m1', 'gone']);
    expect(c.value(['m1', 'gone'])).toBe(1);
    expect(() => c.removeMatching({ replica: 'x' })).toThrow(/no label named "replica"/);
  });

  it('refuses label values that do not match the label names, and descending buckets', () => {
    const r = new Registry();
    const c = new FastCounter('x_total', 'x', ['a', 'b'], r);
    expect(() => c.inc(['only-one'])).toThrow(/expected 2 label values/);
    expect(() => new FastHistogram('y_seconds', 'y', [], [1, 0.5], r)).toThrow(/ascend/);
  });
});
