// A controller-shaped process for the lease process tests: opens the store (running the
// migrations, racing its sibling), runs a LeaderElector on real timers, and appends what it
// did as JSON lines to a file. With chaos on, a leader now and then freezes its event loop
// for longer than the TTL (a GC pause, a stopped VM) or restarts its elector (a new process
// start: new owner id). Usage: node tools/run.cjs elector.child.ts '<json settings>'
import { appendFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { timerScheduler, type Clock, type Rng } from '@llmgw/domain';
import { LeaderElector } from '@llmgw/lease';
import { openStore } from '../store.factory';

interface Settings {
  url: string;
  out: string;
  durationMs: number;
  ttlMs: number;
  renewIntervalMs: number;
  maxClockSkewMs: number;
  chaos: boolean;
}

const settings = JSON.parse(process.argv[2] ?? '{}') as Settings;
const clock: Clock = { now: () => Date.now() };
const rng: Rng = { next: () => randomBytes(4).readUInt32BE(0) / 0x1_0000_0000 };
const write = (line: Record<string, unknown>) => appendFileSync(settings.out, `${JSON.stringify({ pid: process.pid, ...line })}\n`);

async function main(): Promise<void> {
  const store = await openStore(settings.url, { busyTimeoutMs: 2_000 });
  let elector: LeaderElector;
  const startElector = () => {
    elector = new LeaderElector({
      store: store.leases,
      clock,
      rng,
      scheduler: timerScheduler,
      ttlMs: settings.ttlMs,
      renewIntervalMs: settings.renewIntervalMs,
      maxClockSkewMs: settings.maxClockSkewMs,
      onStartedLeading: (t) => write({ ev: 'start', owner: t.ownerId, generation: t.generation, at: t.startedAt }),
      onStoppedLeading: (e) => write({ ev: 'stop', owner: e.ownerId, generation: e.generation, reason: e.reason, at: e.at }),
      onError: (error) => write({ ev: 'error', message: error instanceof Error ? error.message : String(error), at: clock.now() }),
    });
    elector.start();
  };
  startElector();

  let busy = false;
  const act = setInterval(() => {
    if (busy) return;
    const at = clock.now();
    if (!elector.isLeader()) return;
    write({ ev: 'act', owner: elector.ownerId, generation: elector.generation, at });
    if (!settings.chaos || rng.next() >= 0.015) return;
    if (rng.next() < 0.5) {
      // Freeze the whole process past the TTL: the lease expires under it.
      write({ ev: 'freeze', owner: elector.ownerId, at });
      const until = clock.now() + settings.ttlMs + 300;
      while (clock.now() < until) {
        // busy-wait on purpose
      }
    } else {
      // Restart: stop (release) and come back as a new process start with a new owner id.
      busy = true;
      void elector.stop().then(() => {
        write({ ev: 'restart', at: clock.now() });
        setTimeout(() => {
          startElector();
          busy = false;
        }, 100);
      });
    }
  }, 20);

  process.stdout.write(`ready ${process.pid}\n`);
  setTimeout(async () => {
    clearInterval(act);
    await elector.stop();
    write({ ev: 'exit', at: clock.now() });
    await store.close();
    process.exit(0);
  }, settings.durationMs);
}

main().catch((error) => {
  process.stderr.write(`elector child failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
