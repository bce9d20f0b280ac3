import type { Endpoint } from '@llmgw/domain';
import { buildScorers, DEFAULT_SCORER_WEIGHTS, EndpointPicker, rendezvousOrder } from '@llmgw/routing';
import { FakeClock, SeededRng } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { EndpointRegistry } from '../endpoints/endpoint.registry';
import { AdmissionService, ROUND_ROBIN, Waiter, type Admission, type AdmissionOptions, type RouteHow } from './admission.service';
import { deflections, type EndpointLease } from './endpoint.lease';

const ep = (replicaId: string, model = 'm'): Endpoint => ({ replicaId, model, url: `http://h:${replicaId.charCodeAt(0)}`, engine: 'vllm', nodeId: 'n', suspect: false });

function setup(options: Partial<AdmissionOptions> = {}, endpoints: Endpoint[] = [ep('a'), ep('b')]) {
  const clock = new FakeClock(1_000_000);
  const registry = new EndpointRegistry({ clock, breaker: { failureThreshold: 1, cooldownMs: 5_000 }, scrapeStaleAfterMs: 5_000, scrapeUnavailableAfter: 3 });
  registry.apply({ revision: 1, endpoints, catalog: { revision: 1, models: [{ name: 'm', aliases: [] }, { name: 'empty', aliases: [] }] } }, { resync: true });
  const events: string[] = [];
  const admission = new AdmissionService(
    registry,
    new EndpointPicker(buildScorers(DEFAULT_SCORER_WEIGHTS), new SeededRng(7)),
    clock,
    { thresholds: { maxWaiting: 10, maxKvUsage: 0.9, maxInFlight: 1 }, queueBound: 2, queueDeadlineMs: 60_000, retryAfterMaxSeconds: 30, ...options },
    { queued: (model, _s, outcome) => events.push(`queued:${model}:${outcome}`), refused: (model, kind) => events.push(`refused:${model}:${kind}`) },
  );
  return { clock, registry, admission, events };
}

const leaseOf = (a: Admission | Waiter): string => {
  if (a instanceof Waiter || !a.ok) throw new Error(`expected a lease, got ${a instanceof Waiter ? 'a waiter' : a.refusal.kind}`);
  return a.lease.state.id;
};

describe('AdmissionService', () => {
  it('routes to an unsaturated endpoint and acquires it before answering', () => {
    const { admission, registry } = setup();
    expect(leaseOf(admission.admit('m'))).toBeDefined();
    expect(leaseOf(admission.admit('m'))).toBeDefined();
    expect([registry.get('a')?.inFlight, registry.get('b')?.inFlight]).toEqual([1, 1]);
  });

  it('counts a leased request as waiting for output until its first response body, then only as in flight', () => {
    const { admission, registry } = setup({ thresholds: { maxWaiting: 10, maxKvUsage: 0.9, maxInFlight: 100 } }, [ep('a')]);
    const a = registry.get('a')!;
    const first = admission.admit('m') as { ok: true; lease: EndpointLease };
    const second = admission.admit('m') as { ok: true; lease: EndpointLease };
    expect([a.inFlight, a.awaitingOutput, a.candidate(0).awaitingOutput]).toEqual([2, 2, 2]);
    first.lease.outputStarted();
    first.lease.outputStarted(); // every later body piece: no further change
    expect([a.inFlight, a.awaitingOutput]).toEqual([2, 1]);
    first.lease.release('success');
    expect([a.inFlight, a.awaitingOutput]).toEqual([1, 1]);
    // Released before any output (an error, the client gone): both counts drop once.
    second.lease.release('abandoned');
    second.lease.outputStarted();
    expect([a.inFlight, a.awaitingOutput]).toEqual([0, 0]);
    // A stale-connection resend: the old lease gives its wait back, the new one takes it.
    const third = admission.admit('m') as { ok: true; lease: EndpointLease };
    const again = third.lease.renew();
    expect([a.inFlight, a.awaitingOutput]).toEqual([1, 1]);
    again.outputStarted();
    again.release('success');
    expect([a.inFlight, a.awaitingOutput]).toEqual([0, 0]);
  });

  it('avoids endpoints whose fresh scrape says they are saturated', () => {
    const { admission, registry, clock } = setup({ thresholds: { maxWaiting: 10, maxKvUsage: 0.9, maxInFlight: 100 } });
    const a = registry.get('a');
    if (!a) throw new Error('missing');
    a.lastScrape = { load: { waiting: 10 }, at: clock.now(), inFlight: a.inFlight };
    for (let i = 0; i < 5; i++) expect(leaseOf(admission.admit('m'))).toBe('b');
    a.lastScrape = { load: { kvUsage: 0.95 }, at: clock.now(), inFlight: a.inFlight };
    expect(leaseOf(admission.admit('m'))).toBe('b');
  });

  it('queues when everything is saturated, in order, up to the bound; then refuses with 429 and a Retry-After', async () => {
    const { admission, registry, events } = setup();
    admission.admit('m');
    admission.admit('m');
    const w1 = admission.admit('m');
    const w2 = admission.admit('m');
    expect([w1 instanceof Waiter, w2 instanceof Waiter]).toEqual([true, true]);
    const full = admission.admit('m');
    expect(full).toMatchObject({ ok: false, refusal: { kind: 'queue_full', retryAfterSeconds: 30 } });
    expect(admission.depths()).toEqual(new Map([['m', 2]]));

    const b = registry.get('b');
    b?.release('success');
    admission.wake('m');
    expect(leaseOf(await (w1 as Waiter).promise)).toBe('b');
    expect(admission.depths()).toEqual(new Map([['m', 1]]));
    registry.get('a')?.release('success');
    admission.wake('m');
    expect(leaseOf(await (w2 as Waiter).promise)).toBe('a');
    expect(events).toEqual(['refused:m:queue_full', 'queued:m:admitted', 'queued:m:admitted']);
  });

  it('does not let a new request overtake a queued one', () => {
    const { admission, registry } = setup({}, [ep('a')]);
    admission.admit('m');
    const queued = admission.admit('m') as Waiter;
    registry.get('a')?.release('success'); // room appears, but nobody has woken the queue yet
    const late = admission.admit('m');
    expect(late).toBeInstanceOf(Waiter);
    expect(queued.done).toBe(true);
  });

  it('answers a queued request 429 at its deadline', async () => {
    const { admission, events } = setup({ queueDeadlineMs: 30 }, [ep('a')]);
    admission.admit('m');
    const w = admission.admit('m') as Waiter;
    const started = performance.now();
    expect(await w.promise).toMatchObject({ ok: false, refusal: { kind: 'queue_timeout' } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(events).toEqual(['queued:m:timeout', 'refused:m:queue_timeout']);
  });

  it('refuses with 503 when a model has no endpoint, and wakes queued requests with 503 when the endpoints go away', async () => {
    const { admission, registry } = setup({}, [ep('a')]);
    expect(admission.admit('empty')).toMatchObject({ ok: false, refusal: { kind: 'no_endpoints' } });
    admission.admit('m');
    const w = admission.admit('m') as Waiter;
    registry.apply({ revision: 2, endpoints: [], catalog: { revision: 1, models: [{ name: 'm', aliases: [] }] } }, { resync: false });
    expect(await w.promise).toMatchObject({ ok: false, refusal: { kind: 'no_endpoints' } });
  });

  it('drops a cancelled waiter without answering it, and frees its place', () => {
    const { admission } = setup({ queueBound: 1 }, [ep('a')]);
    admission.admit('m');
    const w = admission.admit('m') as Waiter;
    expect(admission.admit('m')).toMatchObject({ ok: false });
    w.cancel();
    expect(admission.depths()).toEqual(new Map());
    expect(admission.admit('m')).toBeInstanceOf(Waiter);
    admission.close();
  });

  it('picks a retry among endpoints not yet tried, and none when all were', () => {
    const { admission, registry } = setup({ thresholds: { maxWaiting: 10, maxKvUsage: 0.9, maxInFlight: 100 } });
    const a = registry.get('a');
    const b = registry.get('b');
    if (!a || !b) throw new Error('missing');
    expect(admission.pickForRetry('m', new Set([a]))).toBe(b);
    expect(admission.pickForRetry('m', new Set([a, b]))).toBeUndefined();
  });

  it('estimates Retry-After from the measured drain rate', () => {
    const { admission, registry, clock } = setup({ queueBound: 0 }, [ep('a')]);
    const a = registry.get('a');
    if (!a) throw new Error('missing');
    // 10 completions in one second → ~10/s; with nothing queued, 1 s.
    for (let i = 0; i < 10; i++) {
      a.acquire(clock.now());
      a.release('success');
    }
    clock.advance(1_000);
    expect(admission.drainRate('m')).toBeCloseTo(10, 5);
    a.acquire(clock.now());
    expect(admission.admit('m')).toMatchObject({ ok: false, refusal: { kind: 'queue_full', retryAfterSeconds: 1 } });
  });

  describe('policies', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => ep(`r${i}`));
    const roomy = { thresholds: { maxWaiting: 10, maxKvUsage: 0.9, maxInFlight: 100 } };
    const affinity = (hash: number): RouteHow => ({ policy: 'prefix-affinity', key: { hash, blocks: 3 }, epsilon: 0.25 });

    it('sends one prefix to its home replica every time while the load allows, and says so', () => {
      const { admission, registry } = setup(roomy, many(4));
      const home = rendezvousOrder(99, registry.endpointsFor('m').map((s) => s.candidate(0)))[0].id;
      for (let i = 0; i < 3; i++) {
        const a = admission.admit('m', affinity(99));
        if (a instanceof Waiter || !a.ok) throw new Error('expected a lease');
        // The first time this router places the key it is cold (nothing holds it); all replicas idle, it goes home all the same.
        const cold = i === 0 ? { cold: true } : {};
        expect([a.lease.state.id, a.lease.reason]).toEqual([home, { policy: 'prefix-affinity', rank: 0, deflectedFrom: [], cap: expect.any(Number), averageCap: expect.any(Number), blocks: 3, ...cold }]);
        a.lease.state.release('success');
      }
    });

    it('passes over the home replica once it carries more than its share, naming it', () => {
      const { admission, registry } = setup(roomy, many(4));
      const order = rendezvousOrder(5, registry.endpointsFor('m').map((s) => s.candidate(0))).map((c) => c.id);
      // Requests in flight stay on the home replica until it reaches the cap ⌈1.25 × (total + 1) / 4⌉.
      const leases = Array.from({ length: 3 }, () => admission.admit('m', affinity(5)));
      const ids = leases.map((a) => (a instanceof Waiter || !a.ok ? '' : a.lease.state.id));
      expect(ids[0]).toBe(order[0]);
      expect(ids[1]).toBe(order[1]);
      const last = leases[2];
      if (last instanceof Waiter || !last.ok) throw new Error('expected a lease');
      expect(last.lease.reason).toMatchObject({ policy: 'prefix-affinity', deflectedFrom: expect.arrayContaining([order[0]]) });
    });

    it('ranks a saturated home replica first and shows it as passed over, rather than ordering only the rest', () => {
      const { admission, registry, clock } = setup(roomy, many(4));
      const order = rendezvousOrder(5, registry.endpointsFor('m').map((s) => s.candidate(0))).map((c) => c.id);
      const home = registry.get(order[0]);
      if (!home) throw new Error('missing');
      home.lastScrape = { load: { running: 1, waiting: 10 }, at: clock.now(), inFlight: 0 };
      const a = admission.admit('m', affinity(5));
      if (a instanceof Waiter || !a.ok) throw new Error('expected a lease');
      expect([a.lease.state.id, a.lease.reason]).toEqual([order[1], { policy: 'prefix-affinity', rank: 1, deflectedFrom: [order[0]], cap: expect.any(Number), averageCap: expect.any(Number), blocks: 3, cold: true }]);
    });

    it("counts as deflections the guard's passes and the two choices' pass, not a cold key's pick by load", () => {
      const passed = { policy: 'prefix-affinity', rank: 3, deflectedFrom: ['a', 'b', 'c'], cap: 3, averageCap: 2, blocks: 4 } as const;
      expect(deflections(passed)).toBe(3);
      expect(deflections({ ...passed, rank: 1, deflectedFrom: ['a'], busier: 'a' })).toBe(1);
      // Cold: a passed by the guard, then b (the first under both caps) and c passed by the cold pick.
      expect(deflections({ ...passed, busier: 'b', cold: true })).toBe(1);
      // Cold, and its pick the first under both caps: all three by the guard.
      expect(deflections({ ...passed, cold: true })).toBe(3);
    });

    it("sends a key's first request by load among the replicas under both caps, and the key's later ones by its order", () => {
      const { admission, registry } = setup(roomy, many(4));
      const order = rendezvousOrder(77, registry.endpointsFor('m').map((s) => s.candidate(0))).map((c) => c.id);
      // This router's requests still awaiting output on the key's first two replicas; ε = 3 keeps
      // every replica under the load caps, so only the choice by load (awaiting output) moves the request.
      for (const id of order.slice(0, 2)) registry.get(id)!.acquire(0);
      const roomyAffinity: RouteHow = { ...affinity(77), epsilon: 3 };
      const first = admission.admit('m', roomyAffinity);
      if (first instanceof Waiter || !first.ok) throw new Error('expected a lease');
      expect([first.lease.state.id, first.lease.reason]).toEqual([
        order[2],
        { policy: 'prefix-affinity', rank: 2, deflectedFrom: order.slice(0, 2), cap: expect.any(Number), averageCap: expect.any(Number), blocks: 3, busier: order[0], cold: true },
      ]);
      expect(deflections(first.lease.reason as Parameters<typeof deflections>[0])).toBe(0);
      first.lease.release('success');
      // Placed once, the key is warm: the two choices keep it within its first two replicas.
      const second = admission.admit('m', roomyAffinity);
      if (second instanceof Waiter || !second.ok) throw new Error('expected a lease');
      expect(order.slice(0, 2)).toContain(second.lease.state.id);
      expect(second.lease.reason).not.toHaveProperty('cold');
    });

    it("sends a cold key home on an idle fleet, but not to a home whose first scrape is not in while the others' are", () => {
      const { admission, registry, clock } = setup(roomy, many(4));
      const order = rendezvousOrder(78, registry.endpointsFor('m').map((s) => s.candidate(0))).map((c) => c.id);
      const scrape = (id: string): void => {
        registry.get(id)!.lastScrape = { load: { running: 0, waiting: 0, kvUsage: 0 }, at: clock.now(), inFlight: 0 };
      };
      const coldTo = (key: number): string => {
        const a = admission.admit('m', { ...affinity(key), epsilon: 3 });
        if (a instanceof Waiter || !a.ok) throw new Error('expected a lease');
        a.lease.release('success');
        return a.lease.state.id;
      };
      // No replica scraped yet: all alike, so the key's order decides.
      expect(coldTo(78)).toBe(order[0]);
      // Every replica but the home scraped idle: the home's KV headroom is unknown, which never
      // reads as empty, so a cold key goes to the next in its order (prefix-affinity.e2e.ts waits
      // for every first scrape before its first turn for this reason).
      const key = 79;
      const order79 = rendezvousOrder(key, registry.endpointsFor('m').map((s) => s.candidate(0))).map((c) => c.id);
      for (const id of order79.slice(1)) scrape(id);
      expect(coldTo(key)).toBe(order79[1]);
      // Its scrape in, the next cold key of the same order goes home.
      scrape(order79[0]);
      const again = [80, 81, 82, 83, 84].find((k) => rendezvousOrder(k, registry.endpointsFor('m').map((s) => s.candidate(0)))[0].id === order79[0]);
      if (again === undefined) throw new Error('no key homed on the same replica among 80..84');
      expect(coldTo(again)).toBe(order79[0]);
    });

    it('falls back to the load scorers for a prefix-affinity request with no prompt to key on', () => {
      const { admission } = setup(roomy, many(2));
      const a = admission.admit('m', { policy: 'prefix-affinity' });
      expect(a instanceof Waiter || !a.ok ? undefined : a.lease.reason).toEqual({ policy: 'least-load', fallback: 'no-prefix' });
    });

    it('goes round the replicas in turn for round-robin', () => {
      const { admission } = setup(roomy, many(3));
      const ids = Array.from({ length: 6 }, () => leaseOf(admission.admit('m', ROUND_ROBIN)));
      expect(ids.slice(0, 3).sort()).toEqual(['r0', 'r1', 'r2']);
      expect(ids.slice(3)).toEqual(ids.slice(0, 3));
    });

    it('keeps the request\'s policy while it waits in the queue', () => {
      const { admission, registry } = setup({}, many(2));
      leaseOf(admission.admit('m'));
      leaseOf(admission.admit('m'));
      const w = admission.admit('m', affinity(5));
      expect(w).toBeInstanceOf(Waiter);
      registry.get('r1')?.release('success');
      admission.wake('m');
      return (w as Waiter).promise.then((a) => expect(a.ok && a.lease.reason.policy).toBe('prefix-affinity'));
    });
  });
});
