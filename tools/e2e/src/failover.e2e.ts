// Node failure under load (issue: the claim the design rests on). Four agents as processes, a
// model wanting two sim-engine replicas on fake 8×H100 nodes, sixteen clients streaming for 60 s;
// one agent holding a replica is killed with kill -9 together with its engines.
import { describe, expect, it } from 'vitest';
import { runFailoverScenario, type FailoverResult } from './failover.scenario';

const LOAD_MS = 60_000;
const KILL_AFTER_MS = 15_000;
const CUT_DEADLINE_MS = 10_000;

describe('a node dies under load', () => {
  it(
    'loses no request started after the kill, ends cut streams with an SSE error, and rebuilds the replica on a survivor',
    async () => {
      const r: FailoverResult = await runFailoverScenario({
        loadMs: LOAD_MS,
        killAfterMs: KILL_AFTER_MS,
        clients: 16,
        cutDeadlineMs: CUT_DEADLINE_MS,
        log: (line) => process.stdout.write(`[failover] ${line}\n`),
      });
      const c = r.counts;
      process.stdout.write(
        `[failover] requests: ${c.total} total, ${c.completed} completed, ${c.failed} failed, ${c.cut} cut, ${c.hung} hung; ` +
          `${c.startedAfterKill} started after the kill, ${c.failedAfterKill} of them not completed; ${c.inFlightAtKill} in flight at the kill\n` +
          `[failover] kill -> unreachable ${ms(r.unreachableAfterMs)}, lost ${ms(r.lostAfterMs)}, replacement ready ${ms(r.replacementReadyAfterMs)}, ` +
          `replacement serving ${ms(r.replacementServingAfterMs)} (on ${r.replacementNode ?? '-'})\n`,
      );
      // Every request that did not complete: outcome, started / first byte / ended in ms relative to the kill, why.
      const rel = (t: number | undefined): number | null => (t === undefined ? null : Math.round(t - r.killAt));
      const notOk = r.records.filter((x) => x.outcome !== 'ok').map((x) => [x.outcome, rel(x.startedAt), rel(x.firstByteAt), rel(x.endedAt), x.detail?.slice(0, 100)]);
      process.stdout.write(`[failover] not completed [outcome, started, first byte, ended (ms from the kill), detail]: ${JSON.stringify(notOk.slice(0, 30))}\n`);

      expect(c.startedAfterKill, 'requests started after the kill').toBeGreaterThan(100);
      expect(c.failedAfterKill, 'requests started after the kill that did not complete (listed above)').toBe(0);
      // The kill hit traffic: streams were cut mid-way, and each one ended with an SSE error in time.
      expect(c.cut, 'streams cut by the kill').toBeGreaterThan(0);
      expect(c.hung, 'hung streams').toBe(0);
      expect(c.cutBadly, `cut streams without an SSE error event, or ending more than ${CUT_DEADLINE_MS} ms after the kill`).toBe(0);
      expect(r.replacementServingAfterMs, 'the rebuilt replica served through the router').toBeDefined();
      expect(r.replacementNode).not.toBe(r.deadNode);
      const live = r.finalReplicas.filter((x) => ['pending', 'fetching', 'starting', 'ready', 'draining'].includes(x.state));
      expect(live.filter((x) => x.state === 'ready')).toHaveLength(2);
      expect(live.filter((x) => x.members.some((m) => m.nodeId === r.deadNode))).toEqual([]);
    },
    420_000,
  );
});

function ms(value: number | undefined): string {
  return value === undefined ? '-' : `${(value / 1000).toFixed(2)} s`;
}
