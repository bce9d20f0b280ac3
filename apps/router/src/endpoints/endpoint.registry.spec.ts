import type { Endpoint, EndpointSnapshot } from '@llmgw/domain';
import { FakeClock } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { EndpointRegistry } from './endpoint.registry';

const ep = (replicaId: string, model = 'm', url = `http://10.0.0.1:${8000 + replicaId.length}`): Endpoint => ({
  replicaId,
  model,
  url,
  engine: 'vllm',
  nodeId: 'n1',
  suspect: false,
});
const snap = (revision: number, endpoints: Endpoint[], models = [{ name: 'm', aliases: ['alias'] }]): EndpointSnapshot => ({ revision, endpoints, catalog: { revision: 1, models } });

function registry(clock = new FakeClock(), onGone?: (replicaId: string) => void): EndpointRegistry {
  return new EndpointRegistry({ clock, breaker: { failureThreshold: 2, cooldownMs: 1_000 }, scrapeStaleAfterMs: 3_000, scrapeUnavailableAfter: 3, onGone });
}

describe('EndpointRegistry', () => {
  it("keeps each endpoint's guard load averaged over time: requests sent, answered and finished, and scrapes, move it", () => {
    const clock = new FakeClock(1_000_000);
    const r = registry(clock);
    r.apply(snap(1, [ep('a')]), { resync: true });
    const a = r.get('a')!;
    expect(a.candidate(clock.now()).averageLoad).toBe(0);
    a.acquire(clock.now()); // one request, no output yet: load 2 (held, and waiting for its first output)
    clock.advance(5_000);
    expect(a.candidate(clock.now()).averageLoad).toBeCloseTo(2 * (1 - Math.exp(-1)), 5);
    a.outputStarted(); // decoding: load 1
    const before = a.candidate(clock.now()).averageLoad!;
    a.recordScrape({ load: { running: 4, waiting: 0 }, at: clock.now(), inFlight: 1 }); // the engine runs 4 (other routers' too)
    clock.advance(2_000);
    const risen = a.candidate(clock.now()).averageLoad!;
    expect(risen).toBeCloseTo(before + (4 - before) * (1 - Math.exp(-2 / 5)), 5);
    a.release('success', true); // within the scrape's freshness: 4, less the one this router saw finish
    clock.advance(60_000);
    expect(a.candidate(clock.now()).averageLoad).toBeCloseTo(3, 3);
  });

  it('keeps the live state of an endpoint that survives a snapshot: in-flight, breaker, drain rate, scrape, last use', () => {
    const clock = new FakeClock();
    const r = registry(clock);
    r.apply(snap(1, [ep('a'), ep('b')]), { resync: true });
    const a = r.get('a');
    if (a === undefined) throw new Error('a missing');
    a.acquire(clock.now());
    a.acquire(clock.now());
    a.release('failure');
    a.acquire(clock.now());
    a.release('failure');
    a.lastScrape = { load: { waiting: 3 }, at: clock.now(), inFlight: a.inFlight };
    expect([a.inFlight, a.breaker.state]).toEqual([1, 'open']);

    const result = r.apply(snap(2, [{ ...ep('a'), suspect: true }, ep('c')]), { resync: false });
    expect(result).toMatchObject({ applied: true, added: ['c'], kept: ['a'], removed: ['b'] });
    expect(r.get('a')).toBe(a);
    expect([a.inFlight, a.breaker.state, a.lastScrape?.load, a.endpoint.suspect, a.removed]).toEqual([1, 'open', { waiting: 3 }, true, false]);
  });

  it('treats a changed URL or engine as a new endpoint', () => {
    const r = registry();
    r.apply(snap(1, [ep('a', 'm', 'http://h:1')]), { resync: true });
    const old = r.get('a');
    old?.acquire(1);
    r.apply(snap(2, [ep('a', 'm', 'http://h:2')]), { resync: false });
    expect(r.get('a')).not.toBe(old);
    expect([old?.removed, r.get('a')?.inFlight]).toEqual([true, 0]);
  });

  it('takes no new requests on a removed endpoint, while its in-flight ones finish against the state they hold', () => {
    const r = registry();
    r.apply(snap(1, [ep('a'), ep('b')]), { resync: true });
    const a = r.get('a');
    a?.acquire(1);
    r.apply(snap(2, [ep('b')]), { resync: false });
    expect(r.endpointsFor('m').map((s) => s.id)).toEqual(['b']);
    expect(a?.candidate(1).draining).toBe(true);
    a?.release('success');
    expect(a?.inFlight).toBe(0);
  });

  it('reports a replica id gone once no snapshot lists it and its last in-flight request has finished', () => {
    const gone: string[] = [];
    const r = registry(new FakeClock(), (id) => gone.push(id));
    r.apply(snap(1, [ep('busy'), ep('idle'), ep('kept')]), { resync: true });
    const busy = r.get('busy');
    if (busy === undefined) throw new Error('busy missing');
    busy.acquire(1);
    busy.acquire(1);
    r.get('kept')?.acquire(1);

    r.apply(snap(2, [ep('kept')]), { resync: false });
    expect(gone).toEqual(['idle']); // nothing in flight: gone at once
    busy.release('success');
    expect(gone).toEqual(['idle']);
    busy.release('failure');
    expect(gone).toEqual(['idle', 'busy']);
    // A kept endpoint finishing its requests is not gone; neither is an ignored (stale) snapshot's doing.
    r.get('kept')?.release('success');
    expect(r.apply(snap(2, []), { resync: false }).applied).toBe(false);
    expect(gone).toEqual(['idle', 'busy']);
    // A resync removes like any snapshot.
    r.apply(snap(1, []), { resync: true });
    expect(gone).toEqual(['idle', 'busy', 'kept']);
  });

  it('does not report an id gone while it is listed again, or while an earlier endpoint with that id still drains', () => {
    const gone: string[] = [];
    const r = registry(new FakeClock(), (id) => gone.push(id));
    r.apply(snap(1, [ep('a', 'm', 'http://h:1')]), { resync: true });
    const first = r.get('a');
    first?.acquire(1);
    // Same id, new URL: a new endpoint replaces the old one, which drains; the id stays listed.
    r.apply(snap(2, [ep('a', 'm', 'http://h:2')]), { resync: false });
    first?.release('success');
    expect(gone).toEqual([]);

    // The id goes away while `second` drains, comes back, and goes away again idle: still draining.
    const second = r.get('a');
    second?.acquire(1);
    r.apply(snap(3, []), { resync: false });
    r.apply(snap(4, [ep('a', 'm', 'http://h:3')]), { resync: false });
    r.apply(snap(5, []), { resync: false });
    expect(gone).toEqual([]);
    second?.release('abandoned');
    expect(gone).toEqual(['a']);
  });

  it('ignores a snapshot that is not newer, unless it starts a new stream (resync)', () => {
    const r = registry();
    r.apply(snap(5, [ep('a')]), { resync: true });
    expect(r.apply(snap(4, [ep('b')]), { resync: false }).applied).toBe(false);
    expect(r.apply(snap(5, [ep('b')]), { resync: false }).applied).toBe(false);
    expect([...r.active()].map((s) => s.id)).toEqual(['a']);
    expect(r.apply(snap(1, [ep('b')]), { resync: true })).toMatchObject({ applied: true, removed: ['a'], added: ['b'] });
    expect(r.revision).toBe(1);
  });

  it('swaps the catalog view with the snapshot; aliases resolve to the canonical model', () => {
    const r = registry();
    const before = r.catalog;
    r.apply(snap(1, [], [{ name: 'm', aliases: ['alias', 'x'] }, { name: 'x', aliases: [] }]), { resync: true });
    expect(r.catalog).not.toBe(before);
    expect(r.catalog.resolve('alias')?.name).toBe('m');
    // A canonical name is never shadowed by another model's alias.
    expect(r.catalog.resolve('x')?.name).toBe('x');
    expect(r.catalog.listed.map((l) => l.id)).toEqual(['m', 'x', 'alias']);
    expect(before.resolve('m')).toBeUndefined();
  });

  it('skips unusable endpoints without dropping the rest', () => {
    const r = registry();
    const result = r.apply(snap(1, [ep('a'), ep('a'), { ...ep('bad'), url: 'ftp://h/' }]), { resync: true });
    expect(result.skipped.map((s) => s.replicaId)).toEqual(['a', 'bad']);
    expect([...r.active()].map((s) => s.id)).toEqual(['a']);
  });

  it('reports last use only for replicas used since start, and a removed one once more', () => {
    const clock = new FakeClock(1_000);
    const r = registry(clock);
    r.apply(snap(1, [ep('a'), ep('b'), ep('c')]), { resync: true });
    expect(r.collectUsage()).toEqual(new Map());
    r.get('a')?.acquire(2_000);
    r.get('c')?.acquire(3_000);
    r.apply(snap(2, [ep('a'), ep('b')]), { resync: false });
    expect(r.collectUsage()).toEqual(new Map([['c', 3_000], ['a', 2_000]]));
    expect(r.collectUsage()).toEqual(new Map([['a', 2_000]]));
  });

  it('judges a scrape by its age: a stale reading is unknown, never idle', () => {
    const clock = new FakeClock(0);
    const r = registry(clock);
    r.apply(snap(1, [ep('a')]), { resync: true });
    const a = r.get('a');
    if (!a) throw new Error('missing');
    a.lastScrape = { load: { waiting: 7 }, at: 0, inFlight: a.inFlight };
    expect(a.candidate(3_000).load).toEqual({ waiting: 7 });
    expect(a.candidate(3_001).load).toBeUndefined();
  });

  it("gives the candidate the engine's reported capacity as maxRunning while its scrape is fresh, and none without it", () => {
    const r = registry();
    r.apply(snap(1, [{ ...ep('a'), engine: 'llamacpp' }, ep('b')]), { resync: true });
    const [a, b] = [r.get('a'), r.get('b')];
    if (a === undefined || b === undefined) throw new Error('missing');
    a.lastScrape = { load: { running: 1, capacity: 4 }, at: 0, inFlight: 0 };
    b.lastScrape = { load: { running: 1 }, at: 0, inFlight: 0 };
    expect(a.candidate(3_000).maxRunning).toBe(4);
    expect(a.candidate(3_001).maxRunning).toBeUndefined();
    expect('maxRunning' in b.candidate(0)).toBe(false);
  });
});
