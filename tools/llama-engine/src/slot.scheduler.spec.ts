import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SlotScheduler } from './slot.scheduler';

describe('SlotScheduler', () => {
  it('starts jobs on free slots, defers the rest, and starts the oldest waiting job on release', () => {
    const started: Array<[string, number]> = [];
    const s = new SlotScheduler<string>(2, (job, slot) => started.push([job, slot]));
    for (const job of ['a', 'b', 'c', 'd']) s.submit(job);
    expect(started).toEqual([
      ['a', 0],
      ['b', 1],
    ]);
    expect([s.processing, s.deferred]).toEqual([2, 2]);
    s.release(1, 'b');
    expect(started.at(-1)).toEqual(['c', 1]);
    expect(s.withdraw('d')).toBe(true);
    expect(s.withdraw('c')).toBe(false); // running, not queued
    s.release(0, 'a');
    expect([s.processing, s.deferred, s.holder(0), s.holder(1)]).toEqual([1, 0, undefined, 'c']);
  });

  it('refuses to release a slot for a job that does not hold it', () => {
    const s = new SlotScheduler<string>(1, () => undefined);
    s.submit('a');
    expect(() => s.release(0, 'b')).toThrow(/not held/);
  });

  it('drain empties the queue and returns it in order', () => {
    const s = new SlotScheduler<number>(1, () => undefined);
    [1, 2, 3].forEach((j) => s.submit(j));
    expect(s.drain()).toEqual([2, 3]);
    expect(s.deferred).toBe(0);
  });

  it('never runs more jobs than slots, never leaves a slot idle while jobs wait, starts jobs in arrival order and never a withdrawn one', () => {
    const op = fc.oneof(fc.constant({ kind: 'submit' as const }), fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }), fc.record({ kind: fc.constant('withdraw' as const), pick: fc.nat() }));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 60 }), (slots, ops) => {
        const order: number[] = [];
        const s = new SlotScheduler<number>(slots, (job) => order.push(job));
        const queued: number[] = [];
        const withdrawn = new Set<number>();
        let next = 0;
        for (const o of ops) {
          if (o.kind === 'submit') {
            const job = next++;
            s.submit(job);
            if (!order.includes(job)) queued.push(job);
          } else if (o.kind === 'release') {
            const held = Array.from({ length: slots }, (_, i) => i).filter((i) => s.holder(i) !== undefined);
            if (held.length === 0) continue;
            const slot = held[o.pick % held.length];
            s.release(slot, s.holder(slot) as number);
          } else if (queued.length > 0) {
            const job = queued.splice(o.pick % queued.length, 1)[0];
            expect(s.withdraw(job)).toBe(true);
            withdrawn.add(job);
          }
          for (let i = queued.length - 1; i >= 0; i--) if (order.includes(queued[i])) queued.splice(i, 1);
          expect(s.processing).toBeLessThanOrEqual(slots);
          if (s.deferred > 0) expect(s.processing).toBe(slots);
          expect(order).toEqual([...order].sort((a, b) => a - b));
        }
        expect(order.filter((job) => withdrawn.has(job))).toEqual([]);
      }),
    );
  });
});
