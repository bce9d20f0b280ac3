import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DomainError, ErrorCode, timerScheduler } from '@llmgw/domain';
import { LeaderElector, type LeadershipEnd, type LeaseStore } from '@llmgw/lease';
import { runTsEntry, spawnProcess, startPostgres, testBackends, waitFor, type SpawnedProcess, type TestDatabase } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from './store.factory';

// Real processes racing for one lease row on one SQLite file and on one PostgreSQL database.
// All processes run on this machine, so they share one clock: the stated skew bound
// (maxClockSkewMs) is what separates their terms, and any overlap at all is a failure.

const TTL = 1_000;
const RENEW = 200;
const SKEW = 100;
const HAMMER_MS = 20_000;

interface Line {
  pid: number;
  ev: 'start' | 'stop' | 'act' | 'error' | 'freeze' | 'restart' | 'exit';
  owner?: string;
  generation?: number;
  reason?: string;
  at: number;
}

interface Term {
  pid: number;
  owner: string;
  generation: number;
  start: number;
  end: number;
  reason?: string;
}

function readLines(file: string): Line[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Line);
}

/** Terms from start/stop pairs; an unterminated term (a killed process) ends at Infinity. */
function terms(lines: Line[]): Term[] {
  const open = new Map<string, Term>();
  const done: Term[] = [];
  for (const l of lines) {
    if (l.ev === 'start') open.set(l.owner!, { pid: l.pid, owner: l.owner!, generation: l.generation!, start: l.at, end: Infinity });
    if (l.ev === 'stop') {
      const t = open.get(l.owner!);
      if (t === undefined) throw new Error(`stop without start: ${JSON.stringify(l)}`);
      open.delete(l.owner!);
      done.push({ ...t, end: l.at, reason: l.reason });
    }
  }
  return [...done, ...open.values()].sort((a, b) => a.start - b.start);
}

function childSettings(url: string, out: string, durationMs: number, chaos: boolean): string {
  return JSON.stringify({ url, out, durationMs, ttlMs: TTL, renewIntervalMs: RENEW, maxClockSkewMs: SKEW, chaos });
}

async function spawnElector(settings: string): Promise<SpawnedProcess> {
  const { command, args } = runTsEntry('libs/store/src/e2e/elector.child.ts', [settings]);
  return spawnProcess({ command, args, name: 'elector', readyWhen: { stdoutMatch: /ready \d+/ }, deadlineMs: 30_000 });
}

describe.each(testBackends())('two elector processes on one $name database', (backend) => {
  let db: TestDatabase;
  let dir: string;
  const children: SpawnedProcess[] = [];
  beforeEach(async () => {
    db = await backend.create();
    dir = mkdtempSync(join(tmpdir(), 'llmgw-lease-e2e-'));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) await c.stop('SIGKILL');
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`hammered for ${HAMMER_MS / 1000} s with freezes and restarts: leading intervals never overlap`, async () => {
    const files = [join(dir, 'a.jsonl'), join(dir, 'b.jsonl')];
    children.push(...(await Promise.all(files.map((f) => spawnElector(childSettings(db.url, f, HAMMER_MS, true))))));
    for (const c of children) expect(await c.waitForExit(HAMMER_MS + 30_000)).toMatchObject({ code: 0 });

    const lines = files.flatMap(readLines);
    const all = terms(lines);
    expect(all.every((t) => Number.isFinite(t.end))).toBe(true);
    let handovers = 0;
    let minGap = Infinity;
    for (let i = 1; i < all.length; i++) {
      const [prev, next] = [all[i - 1], all[i]];
      const overlap = Math.min(prev.end, next.end) - next.start;
      if (overlap > 0) throw new Error(`terms overlap by ${overlap} ms:\n${JSON.stringify(prev)}\n${JSON.stringify(next)}`);
      if (prev.owner !== next.owner) {
        handovers++;
        minGap = Math.min(minGap, next.start - prev.end);
        expect(next.generation).toBeGreaterThan(prev.generation);
      }
    }
    // Every "I am leading" sample falls inside one of that owner's terms.
    const acts = lines.filter((l) => l.ev === 'act');
    for (const a of acts) {
      // An expired term ends at validUntil, which is exclusive; a stopped one ends when stop() ran, after its last act.
      const inTerm = all.some(
        (t) => t.owner === a.owner && t.generation === a.generation && a.at >= t.start && (a.at < t.end || (t.reason === 'stopped' && a.at === t.end)),
      );
      if (!inTerm) {
        const near = lines.filter((l) => Math.abs(l.at - a.at) < 2 * TTL && l.ev !== 'act').map((l) => JSON.stringify(l));
        throw new Error(`acted outside its term: ${JSON.stringify(a)}\nterms: ${JSON.stringify(all)}\nnearby:\n${near.join('\n')}`);
      }
    }
    const freezes = lines.filter((l) => l.ev === 'freeze').length;
    const restarts = lines.filter((l) => l.ev === 'restart').length;
    console.log(
      `[lease ${backend.name}] ${all.length} terms, ${handovers} handovers (${freezes} freezes, ${restarts} restarts), ${acts.length} acts, ` +
        `smallest gap between owners ${minGap} ms, no overlap`,
    );
    expect(handovers).toBeGreaterThanOrEqual(4);
    expect(new Set(all.map((t) => t.pid)).size).toBe(2);
  }, HAMMER_MS + 60_000);

  it('kill -9 of the leader: the other process leads within ttl + renew interval', async () => {
    const files = [join(dir, 'a.jsonl'), join(dir, 'b.jsonl')];
    children.push(...(await Promise.all(files.map((f) => spawnElector(childSettings(db.url, f, 60_000, false))))));
    const first = await waitFor(() => files.flatMap(readLines).find((l) => l.ev === 'start'), { deadlineMs: 10_000, message: 'a leader' });
    // Let it renew a few times so the kill lands on a steady leader.
    await waitFor(() => files.flatMap(readLines).some((l) => l.ev === 'act' && l.pid === first.pid && l.at >= first.at + 3 * RENEW), { deadlineMs: 10_000 });
    const leader = children.find((c) => c.pid === first.pid)!;
    const standby = children.find((c) => c !== leader)!;
    const killedAt = Date.now();
    await leader.kill9();
    const took = await waitFor(() => files.flatMap(readLines).find((l) => l.ev === 'start' && l.pid === standby.pid), {
      deadlineMs: 10_000,
      message: 'the standby leading',
    });
    const failover = took.at - killedAt;
    console.log(`[lease ${backend.name}] kill -9 of the leader: standby led after ${failover} ms (bound ttl + renew = ${TTL + RENEW} ms)`);
    expect(took.generation).toBe(first.generation! + 1);
    expect(failover).toBeGreaterThanOrEqual(TTL - RENEW - 50); // it waited for the claim to expire
    expect(failover).toBeLessThanOrEqual(TTL + RENEW + 1_000); // 1 s of scheduling slack on a busy machine
  }, 60_000);
});

describe('store outage on a throw-away PostgreSQL', () => {
  it('keeps the claim for ttl - skew after the last successful renewal, then lets go; resumes when the server is back', async () => {
    const server = await startPostgres();
    const store = await openStore(server.url, { connectTimeoutMs: 500, queryTimeoutMs: 500 });
    const clock = { now: () => Date.now() };
    let lastSuccessT0 = 0;
    let renewals = 0;
    const leases: LeaseStore = {
      claim: async (name, owner, now, ttl) => {
        const row = await store.leases.claim(name, owner, now, ttl);
        if (row?.owner === owner) {
          lastSuccessT0 = Math.max(lastSuccessT0, now);
          renewals++;
        }
        return row;
      },
      release: (name, owner) => store.leases.release(name, owner),
    };
    const ends: (LeadershipEnd & { firedAt: number })[] = [];
    const errors: unknown[] = [];
    const elector = new LeaderElector({
      store: leases,
      clock,
      rng: { next: () => randomBytes(4).readUInt32BE(0) / 0x1_0000_0000 },
      scheduler: timerScheduler,
      ttlMs: TTL,
      renewIntervalMs: RENEW,
      maxClockSkewMs: SKEW,
      onStoppedLeading: (e) => ends.push({ ...e, firedAt: Date.now() }),
      onError: (e) => errors.push(e),
    });
    try {
      elector.start();
      await waitFor(() => elector.isLeader(), { deadlineMs: 5_000, message: 'leading' });
      // A steady leader: it has renewed a few times since it won the claim.
      await waitFor(() => renewals >= 3, { deadlineMs: 5_000, message: 'renewing' });

      // Sampled from before the stop begins: on a busy machine the stop itself may outlast the claim.
      const samples: { before: number; after: number; leader: boolean }[] = [];
      const sample = (): void => {
        // isLeader() reads the clock between `before` and `after`: no sample straddles a tick unnoticed.
        const before = Date.now();
        const leader = elector.isLeader();
        samples.push({ before, after: Date.now(), leader });
      };
      const sampler = setInterval(sample, 5);
      sample();
      let downAt: number;
      let end: LeadershipEnd & { firedAt: number };
      try {
        await server.stop();
        downAt = Date.now();
        end = await waitFor(() => ends[0], { deadlineMs: TTL + 2_000, intervalMs: 5, message: 'leadership given up' });
      } finally {
        clearInterval(sampler);
      }
      sample();
      const keptUntil = lastSuccessT0 + TTL - SKEW;
      console.log(
        `[lease postgres outage] server down at +0 ms; claim kept until +${keptUntil - downAt} ms ` +
          `(last renewal +${lastSuccessT0 - downAt} ms, ttl - skew = ${TTL - SKEW} ms); callback at +${end.firedAt - downAt} ms`,
      );
      expect(lastSuccessT0).toBeLessThanOrEqual(downAt);
      expect(end).toMatchObject({ reason: 'expired', at: keptUntil, generation: 1 });
      expect(end.firedAt).toBeGreaterThanOrEqual(keptUntil);
      // Leading only while the clock was before keptUntil, and not leading only once it had reached it.
      expect(samples.filter((s) => s.leader).every((s) => s.before < keptUntil)).toBe(true);
      expect(samples.filter((s) => !s.leader).every((s) => s.after >= keptUntil)).toBe(true);
      expect(samples.some((s) => s.leader)).toBe(true);
      expect(samples.some((s) => !s.leader)).toBe(true);
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.every((e) => e instanceof DomainError && e.code === ErrorCode.Unavailable)).toBe(true);

      await server.start();
      await waitFor(() => elector.isLeader(), { deadlineMs: 10_000, message: 'leading again after the outage' });
      expect(elector.generation).toBe(1); // nobody else held it in between
    } finally {
      await elector.stop();
      await store.close();
      await server.close();
    }
  }, 60_000);
});
