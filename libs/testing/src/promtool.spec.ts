import { describe, expect, it } from 'vitest';
import { promtoolCheckMetrics } from './promtool';

describe('promtoolCheckMetrics', () => {
  it('passes a clean scrape and reports a bad one', () => {
    expect(promtoolCheckMetrics('# HELP up Up.\n# TYPE up gauge\nup 1\n')).toEqual({ status: 0, output: '' });
    const bad = promtoolCheckMetrics('# HELP x_total X.\n# TYPE x_total gauge\nx_total 1\n');
    expect(bad.status).not.toBe(0);
    expect(bad.output).toContain('x_total non-counter metrics should not have "_total" suffix');
  });
});
