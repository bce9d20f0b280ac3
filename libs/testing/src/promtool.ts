import { spawnSync } from 'node:child_process';

/** What `promtool check metrics` said about a scrape: exit status 0 means it passed. */
export interface PromtoolResult {
  status: number | null;
  /** Its stdout and stderr: one line per problem. */
  output: string;
}

/**
 * Runs `promtool check metrics` (Debian package `prometheus`) on a Prometheus text scrape.
 * Throws when promtool is not installed: tests that lint metrics fail rather than skip, and CI installs it.
 */
export function promtoolCheckMetrics(text: string): PromtoolResult {
  const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  if (run.error) throw new Error(`promtool is needed (apt-get install -y prometheus): ${run.error.message}`);
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}
