// The node-failure scenario of tools/e2e/src/failover.e2e.ts, run longer, with its counts and
// timings written to docs/benchmarks.md. Run:
//   npm run bench:failover -- [--duration 180] [--kill-after 60] [--clients 16]   (seconds)
import * as os from 'node:os';
import { countRecords, runFailoverScenario } from '../e2e/src/failover.scenario';
import type { StreamRecord } from '@llmgw/testing';
import { machineLine, markdownTable, percentile, printTable, writeSection } from './bench-report';

const CUT_DEADLINE_MS = 10_000;

interface Args {
  durationS: number;
  killAfterS: number;
  clients: number;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { durationS: 180, killAfterS: 60, clients: 16 };
  const names: Record<string, keyof Args> = { '--duration': 'durationS', '--kill-after': 'killAfterS', '--clients': 'clients' };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2);
    const key = names[flag];
    const raw = inline ?? argv[++i];
    const value = Number(raw);
    if (key === undefined || !Number.isFinite(value) || value <= 0) {
      process.stderr.write(`failover.bench: bad argument ${argv[i - (inline === undefined ? 1 : 0)] ?? ''} ${raw ?? ''}\nusage: failover.bench.ts [--duration S] [--kill-after S] [--clients N]\n`);
      process.exit(2);
    }
    args[key] = value;
  }
  if (args.killAfterS >= args.durationS) {
    process.stderr.write('failover.bench: --kill-after must be shorter than --duration\n');
    process.exit(2);
  }
  return args;
}

const fmtS = (ms: number | undefined): string => (ms === undefined ? '-' : (ms / 1000).toFixed(2));
const fmtMs = (ms: number): string => (Number.isNaN(ms) ? '-' : ms.toFixed(0));

function ttfb(records: readonly StreamRecord[]): number[] {
  return records.filter((r) => r.outcome === 'ok' && r.firstByteAt !== undefined).map((r) => (r.firstByteAt as number) - r.startedAt);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const command = `npm run bench:failover -- --duration ${args.durationS} --kill-after ${args.killAfterS} --clients ${args.clients}`;
  process.stdout.write(`${command}\n${machineLine(os.cpus(), os.totalmem())}\n\n`);
  const r = await runFailoverScenario({
    loadMs: args.durationS * 1000,
    killAfterMs: args.killAfterS * 1000,
    clients: args.clients,
    cutDeadlineMs: CUT_DEADLINE_MS,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  const c = countRecords(r.records, r.killAt, CUT_DEADLINE_MS);
  const before = r.records.filter((x) => x.endedAt < r.killAt);
  const after = r.records.filter((x) => x.startedAt > r.killAt);
  const deadNodeLeft = r.finalReplicas.filter((x) => ['pending', 'fetching', 'starting', 'ready', 'draining'].includes(x.state) && x.members.some((m) => m.nodeId === r.deadNode)).length;

  const counts: string[][] = [
    ['requests', 'count'],
    ['total', String(c.total)],
    ['completed', String(c.completed)],
    ['failed (before first byte)', String(c.failed)],
    ['cut mid-stream (SSE error)', String(c.cut - c.cutBadly)],
    ['cut without error / late', String(c.cutBadly)],
    ['hung', String(c.hung)],
    ['in flight at the kill', String(c.inFlightAtKill)],
    ['started after the kill', String(c.startedAfterKill)],
    ['  of which not completed', String(c.failedAfterKill)],
    ['replicas left on the dead node', String(deadNodeLeft)],
  ];
  const timings: string[][] = [
    ['from the kill to', 'seconds'],
    ['node unreachable', fmtS(r.unreachableAfterMs)],
    ['node lost', fmtS(r.lostAfterMs)],
    ['replacement ready', fmtS(r.replacementReadyAfterMs)],
    ['replacement serving', fmtS(r.replacementServingAfterMs)],
  ];
  const latency: string[][] = [
    ['time to first token (ms)', 'p50', 'p99', 'n'],
    ['before the kill', fmtMs(percentile(ttfb(before), 50)), fmtMs(percentile(ttfb(before), 99)), String(ttfb(before).length)],
    ['after the kill', fmtMs(percentile(ttfb(after), 50)), fmtMs(percentile(ttfb(after), 99)), String(ttfb(after).length)],
  ];
  for (const table of [counts, timings, latency]) printTable(table);

  const md = markdownTable;
  const body = [
    `Command: \`${command}\``,
    '',
    `Machine: ${machineLine(os.cpus(), os.totalmem())}`,
    '',
    `Router, controller, catalog API and four agents as processes: three with fake 8×H100-80GB inventories running sim-engine ` +
      `replicas of a model wanting two (each a whole node: 8 GPUs, tensor parallel 8; ~0.4 s streams of 32 tokens), one CPU-only. ${args.clients} clients stream continuously for ` +
      `${args.durationS} s; after ${args.killAfterS} s the agent holding one replica is killed with SIGKILL together with its engines. ` +
      `Controller health windows: heartbeat 0.5 s, unreachable after 1.5 s, lost after 3 s. Dead node: replica rebuilt on ${r.replacementNode ?? '-'}.`,
    '',
    md(counts),
    '',
    md(timings),
    '',
    md(latency),
  ].join('\n');
  const file = writeSection('failover', 'Node failure under load', body);
  process.stdout.write(`wrote ${file}\n`);
  if (c.failedAfterKill > 0 || c.hung > 0 || c.cutBadly > 0 || r.replacementServingAfterMs === undefined || deadNodeLeft > 0) {
    process.stdout.write('FAILED: see the counts above\n');
    process.exitCode = 1;
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`failover.bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
