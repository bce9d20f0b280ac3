import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Candidate } from './candidate';
import { averageCap, chooseByAffinity, fnv1aUtf8, guardLoad, loadCap, policyFor, prefixAffinityParams, prefixKey, RecentKeys, renderPromptPrefix, rendezvousOrder, requestPrefixKey, RoundRobin } from './prefix-affinity';

const cand = (id: string, over: Partial<Candidate> = {}): Candidate => ({
  id,
  models: ['m'],
  suspect: false,
  draining: false,
  breaker: 'closed',
  probeAvailable: false,
  inFlight: 0,
  ...over,
});
const replicas = (n: number, prefix = 'r'): Candidate[] => Array.from({ length: n }, (_, i) => cand(`${prefix}${i}`));
const params = { blockChars: 64, maxBlocks: 8, epsilon: 0.25 };

describe('renderPromptPrefix', () => {
  const system = { role: 'system', content: 'You are terse.' };
  it('renders chat messages canonically: key order and whitespace of the body do not matter', () => {
    const a = JSON.parse('{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"b":1,"a":2}}}]}');
    const b = JSON.parse('{ "tools": [ { "function": { "parameters": { "a": 2, "b": 1 }, "name": "f" }, "type": "function" } ], "messages": [ { "content": "hi", "role": "user" } ], "model": "other" }');
    expect(renderPromptPrefix(a, 'chat', 10_000)).toBe(renderPromptPrefix(b, 'chat', 10_000));
  });

  it.each([
    ['a role', { messages: [{ role: 'assistant', content: 'hi' }] }],
    ['the content', { messages: [{ role: 'user', content: 'ho' }] }],
    ['the tools', { messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'g' } }] }],
    ['a system prompt', { messages: [system, { role: 'user', content: 'hi' }] }],
  ])('tells prompts apart by %s', (_what, other) => {
    const base = renderPromptPrefix({ messages: [{ role: 'user', content: 'hi' }] }, 'chat', 10_000);
    expect(renderPromptPrefix(other, 'chat', 10_000)).not.toBe(base);
  });

  it('keys a conversation on its start, so every later turn renders the same', () => {
    const turn1 = { messages: [system, { role: 'user', content: 'first question' }] };
    const turn3 = {
      messages: [...turn1.messages, { role: 'assistant', content: 'answer' }, { role: 'user', content: 'second' }, { role: 'assistant', content: 'more' }, { role: 'user', content: 'third' }],
    };
    expect(renderPromptPrefix(turn3, 'chat', 10_000)).toBe(renderPromptPrefix(turn1, 'chat', 10_000));
    expect(requestPrefixKey(turn3, 'chat', params)).toEqual(requestPrefixKey(turn1, 'chat', params));
  });

  it('takes text content parts as their text and a completion prompt as given', () => {
    const parts = { messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] };
    expect(renderPromptPrefix(parts, 'chat', 10_000)).toContain('hi');
    expect(renderPromptPrefix({ prompt: 'Once upon a time' }, 'completions', 10_000)).toBe('Once upon a time');
  });

  it.each([
    ['no messages', { model: 'm' }, 'chat'],
    ['empty messages', { messages: [] }, 'chat'],
    ['no prompt', { model: 'm' }, 'completions'],
    ['not an object', 'text', 'chat'],
  ] as const)('has no prefix for %s', (_what, body, api) => {
    expect(renderPromptPrefix(body, api, 10_000)).toBeUndefined();
    expect(requestPrefixKey(body, api, params)).toBeUndefined();
  });

  it('never renders more than the limit, however long the prompt', () => {
    const big = 'x'.repeat(200_000);
    expect(renderPromptPrefix({ messages: [{ role: 'system', content: big }, { role: 'user', content: big }] }, 'chat', 512)).toHaveLength(512);
    expect(renderPromptPrefix({ prompt: big }, 'completions', 512)).toHaveLength(512);
  });
});

describe('prefixKey', () => {
  it('hashes at most maxBlocks blocks of a 200 KB prompt', () => {
    const key = prefixKey('y'.repeat(200 * 1024), 256, 32);
    expect(key?.blocks).toBe(32);
    // The same work through the whole request path: rendering stops at maxBlocks × blockChars.
    const viaRequest = requestPrefixKey({ prompt: 'z'.repeat(200 * 1024) }, 'completions', { blockChars: 256, maxBlocks: 32, epsilon: 0.25 });
    expect(viaRequest?.blocks).toBeLessThanOrEqual(32);
  });

  it('counts a short last block, and has no key for empty text', () => {
    expect(prefixKey('a'.repeat(130), 64, 8)?.blocks).toBe(3);
    expect(prefixKey('', 64, 8)).toBeUndefined();
  });

  it('chains: text that differs anywhere in the hashed blocks gets a different key, text past them does not', () => {
    const text = 'a'.repeat(64 * 8);
    expect(prefixKey(`b${text.slice(1)}`, 64, 8)?.hash).not.toBe(prefixKey(text, 64, 8)?.hash);
    expect(prefixKey(`${text}anything after`, 64, 8)).toEqual(prefixKey(text, 64, 8));
  });

  it('hashes the UTF-8 bytes of the text (FNV-1a, checked against Buffer\'s encoding)', () => {
    const reference = (bytes: Uint8Array): number => {
      let h = 0x811c9dc5;
      for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
      return h >>> 0;
    };
    fc.assert(fc.property(fc.string({ unit: 'grapheme', maxLength: 300 }), (s) => fnv1aUtf8(s, 0, s.length) === reference(Buffer.from(s, 'utf8'))));
    expect(prefixKey('é🙂', 16, 4)?.hash).not.toBe(prefixKey('e🙂', 16, 4)?.hash);
  });
});

describe('rendezvousOrder', () => {
  it('orders the same replica set the same way in any router, whatever order the set comes in', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.shuffledSubarray(replicas(8), { minLength: 1 }), (key, set) => {
        const again = [...set].reverse().map((c) => ({ ...c })); // another router's own objects, another order
        expect(rendezvousOrder(key, set).map((c) => c.id)).toEqual(rendezvousOrder(key, again).map((c) => c.id));
      }),
    );
  });

  it('moves about 1/8 of the prefixes when one of 8 replicas leaves, and only those that were on it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 1000 }), (gone, salt) => {
        const all = replicas(8);
        const rest = all.filter((_, i) => i !== gone);
        let moved = 0;
        const keys = 4000;
        for (let k = 0; k < keys; k++) {
          const key = prefixKey(`conversation ${salt}/${k}`, 64, 4)!.hash;
          const before = rendezvousOrder(key, all)[0].id;
          const after = rendezvousOrder(key, rest)[0].id;
          if (before !== after) {
            moved++;
            expect(before).toBe(`r${gone}`);
          }
        }
        expect(moved / keys).toBeGreaterThan(0.125 * 0.75);
        expect(moved / keys).toBeLessThan(0.125 * 1.25);
      }),
      { numRuns: 8 },
    );
  });

  it('spreads keys evenly over the replicas', () => {
    const counts = new Map<string, number>();
    for (let k = 0; k < 8000; k++) {
      const id = rendezvousOrder(prefixKey(`system prompt ${k}`, 64, 4)!.hash, replicas(8))[0].id;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    expect(counts.size).toBe(8);
    for (const n of counts.values()) expect(Math.abs(n - 1000)).toBeLessThan(150);
  });
});

describe('chooseByAffinity (the load guard)', () => {
  const loadArb = fc.record({ running: fc.integer({ min: 0, max: 40 }), waiting: fc.integer({ min: 0, max: 10 }), sent: fc.integer({ min: -5, max: 10 }) });

  const candidateArb = fc.record({ l: loadArb, awaiting: fc.integer({ min: 0, max: 10 }), average: fc.option(fc.double({ min: 0, max: 60, noNaN: true }), { nil: undefined }) });
  const build = (rows: { l: { running: number; waiting: number; sent: number }; awaiting: number; average: number | undefined }[]): Candidate[] =>
    rows.map(({ l, awaiting, average }, i) => {
      const inFlight = Math.max(0, l.sent);
      return cand(`r${i}`, { load: { running: l.running, waiting: l.waiting }, inFlight, inFlightAtScrape: inFlight - l.sent, awaitingOutput: Math.min(awaiting, inFlight), ...(average !== undefined && { averageLoad: average }) });
    });

  it('never picks a replica at or above the cap while one below exists', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.array(candidateArb, { minLength: 1, maxLength: 12 }), fc.double({ min: 0.01, max: 3, noNaN: true }), (key, rows, epsilon) => {
        const cs = build(rows);
        const choice = chooseByAffinity(key, cs, epsilon);
        const cap = loadCap(cs.map(guardLoad), epsilon);
        expect(choice).toBeDefined();
        expect(guardLoad(choice!.chosen)).toBeLessThan(cap);
        const order = rendezvousOrder(key, cs);
        expect(order.indexOf(choice!.chosen)).toBe(choice!.rank);
        expect(choice!.deflectedFrom).toEqual(order.slice(0, choice!.rank).map((c) => c.id));
      }),
    );
  });

  it('takes the first replica in the order under both caps (or the next under both, when it has fewer awaiting output), and the first under the cap now only when none is under both', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.array(candidateArb, { minLength: 1, maxLength: 12 }), fc.double({ min: 0.01, max: 3, noNaN: true }), (key, rows, epsilon) => {
        const cs = build(rows);
        const choice = chooseByAffinity(key, cs, epsilon)!;
        const cap = loadCap(cs.map(guardLoad), epsilon);
        const avgCap = averageCap(cs.map((c) => c.averageLoad ?? guardLoad(c)), epsilon);
        const underBoth = (c: Candidate): boolean => guardLoad(c) < cap && (c.averageLoad ?? guardLoad(c)) <= avgCap;
        const order = rendezvousOrder(key, cs);
        const [first, second] = order.filter(underBoth);
        const awaiting = (c: Candidate): number => c.awaitingOutput ?? 0;
        const want =
          first === undefined ? order.find((c) => guardLoad(c) < cap) : second !== undefined && awaiting(second) < awaiting(first) ? second : first;
        expect(choice.chosen).toBe(want);
        expect(choice.cap).toBe(cap);
        expect(choice.averageCap).toBeCloseTo(avgCap);
      }),
    );
  });

  it('caps the average at (1 + ε) × the mean of the averages (at least 1), and the load now at ⌈(1 + ε)(total + 1) / n⌉', () => {
    expect(averageCap([2, 2, 2, 2, 2, 2, 2, 2], 0.25)).toBe(2.5);
    // A quiet fleet: the one replica that served the last requests is far above the mean, and stays under the floor of 1.
    expect(averageCap([0.6, 0, 0, 0], 0.25)).toBe(1);
    expect(averageCap([0, 0], 0.25)).toBe(1);
    // 15 requests on 8 replicas, the 16th being placed: the cap now is 3 for any ε below 0.5.
    expect(loadCap([2, 2, 2, 2, 2, 2, 2, 1], 0.25)).toBe(3);
    expect(loadCap([2, 2, 2, 2, 2, 2, 2, 1], 0.01)).toBe(3);
    expect(loadCap([0, 0, 0, 0, 0, 0, 0, 0], 0.25)).toBe(1);
  });

  it('moves a popular prefix off its home once the home has carried more than (1 + ε) × the mean for a while, not while it is a little above it', () => {
    const cs = replicas(8).map((c) => ({ ...c, load: { running: 2, waiting: 0 }, inFlightAtScrape: 0, averageLoad: 2 }));
    const key = 98765;
    const home = rendezvousOrder(key, cs)[0];
    // The home above the mean on average over the last seconds, within (1 + ε) of it: it keeps its prefix.
    const blip = cs.map((c) => (c.id === home.id ? { ...c, averageLoad: 2.4 } : c));
    expect(chooseByAffinity(key, blip, 0.25)!.chosen.id).toBe(home.id);
    // The same home at 2 now, but at 3 on average over the last seconds (a hot prefix): passed over.
    const hot = cs.map((c) => (c.id === home.id ? { ...c, averageLoad: 3 } : { ...c, averageLoad: 1.9 }));
    const moved = chooseByAffinity(key, hot, 0.25)!;
    expect(moved.chosen.id).not.toBe(home.id);
    expect(moved.deflectedFrom).toEqual([home.id]);
  });

  it("sends the request to the key's runner-up when the home has more of this router's requests awaiting output, and never further", () => {
    const cs = replicas(8).map((c) => ({ ...c, load: { running: 2, waiting: 0 }, inFlight: 2, inFlightAtScrape: 2, averageLoad: 2 }));
    const key = 4242;
    const [home, runnerUp, third] = rendezvousOrder(key, cs);
    const withAwaiting = (n: Record<string, number>): Candidate[] => cs.map((c) => ({ ...c, awaitingOutput: n[c.id] ?? 0 }));
    // ε = 1 leaves every replica here under both caps, so only the two choices decide.
    // Equal: the home keeps it.
    const tie = chooseByAffinity(key, withAwaiting({ [home.id]: 1, [runnerUp.id]: 1 }), 1);
    expect(tie).toMatchObject({ chosen: { id: home.id }, rank: 0, deflectedFrom: [] });
    expect(tie?.busier).toBeUndefined();
    // The home has a request in prefill and the runner-up none: the runner-up.
    expect(chooseByAffinity(key, withAwaiting({ [home.id]: 1 }), 1)).toMatchObject({ chosen: { id: runnerUp.id }, rank: 1, deflectedFrom: [home.id], busier: home.id });
    // Both busy and the third idle: still one of the first two, never a third replica that holds nothing of the prefix.
    expect(chooseByAffinity(key, withAwaiting({ [home.id]: 2, [runnerUp.id]: 1 }), 1)!.chosen.id).toBe(runnerUp.id);
    expect(chooseByAffinity(key, withAwaiting({ [home.id]: 1, [runnerUp.id]: 1, [third.id]: 0 }), 1)!.chosen.id).toBe(home.id);
  });

  it('sends a cold key where the cold chooser says, among the replicas under both caps in its order, and says so', () => {
    const cs = replicas(8).map((c) => ({ ...c, load: { running: 2, waiting: 0 }, inFlight: 2, inFlightAtScrape: 2, averageLoad: 2 }));
    const key = 4242;
    const order = rendezvousOrder(key, cs);
    // The first two over the cap now: the chooser sees the other six, in the key's order.
    const loaded = cs.map((c) => (c.id === order[0].id || c.id === order[1].id ? { ...c, inFlight: 9, averageLoad: 9 } : c));
    const seen: string[][] = [];
    const last = (under: readonly Candidate[]): Candidate => {
      seen.push(under.map((c) => c.id));
      return under[under.length - 1];
    };
    expect(chooseByAffinity(key, loaded, 0.25, undefined, last)).toMatchObject({ chosen: { id: order[7].id }, rank: 7, cold: true, busier: order[2].id, deflectedFrom: order.slice(0, 7).map((c) => c.id) });
    expect(seen).toEqual([order.slice(2).map((c) => c.id)]);
    // Its pick the first under both caps: no busier.
    const first = chooseByAffinity(key, cs, 0.25, undefined, (under) => under[0]);
    expect(first).toMatchObject({ chosen: { id: order[0].id }, rank: 0, deflectedFrom: [], cold: true });
    expect(first?.busier).toBeUndefined();
    // A warm key never asks it, and is not marked cold.
    expect(chooseByAffinity(key, loaded, 0.25)?.cold).toBeUndefined();
    // A chooser that returns what it was not given is a bug, not a choice.
    expect(() => chooseByAffinity(key, loaded, 0.25, undefined, () => loaded.filter((c) => c.id === order[0].id)[0])).toThrow(/cold chooser/);
  });

  it('for a cold key, hands the chooser exactly the candidates under both caps in the key order (or chooses as for a warm key when none is under both)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.array(candidateArb, { minLength: 1, maxLength: 12 }), fc.double({ min: 0.01, max: 3, noNaN: true }), fc.nat(), (key, rows, epsilon, pick) => {
        const cs = build(rows);
        let given: readonly Candidate[] | undefined;
        const choice = chooseByAffinity(key, cs, epsilon, undefined, (under) => {
          given = under;
          return under[pick % under.length];
        })!;
        const cap = loadCap(cs.map(guardLoad), epsilon);
        const avgCap = averageCap(cs.map((c) => c.averageLoad ?? guardLoad(c)), epsilon);
        const underBoth = (c: Candidate): boolean => guardLoad(c) < cap && (c.averageLoad ?? guardLoad(c)) <= avgCap;
        const order = rendezvousOrder(key, cs);
        const eligible = order.filter(underBoth);
        if (eligible.length === 0) {
          expect(given).toBeUndefined();
          expect(choice.chosen).toBe(order.find((c) => guardLoad(c) < cap));
          return;
        }
        expect(given).toEqual(eligible);
        expect(choice.chosen).toBe(eligible[pick % eligible.length]);
        expect(guardLoad(choice.chosen)).toBeLessThan(cap);
        expect(choice.rank).toBe(order.indexOf(choice.chosen));
      }),
    );
  });

  it('counts a request waiting for its first output twice: a prefill delays whoever comes next', () => {
    expect(guardLoad(cand('a', { inFlight: 3, awaitingOutput: 2, load: { running: 3, waiting: 0 }, inFlightAtScrape: 3 }))).toBe(5);
    expect(guardLoad(cand('a', { inFlight: 3 }))).toBe(3);
  });

  it('keeps a prefix on its home replica under even load, and moves it when that replica runs hot', () => {
    const cs = replicas(8).map((c) => ({ ...c, load: { running: 2, waiting: 0 }, inFlightAtScrape: 0 }));
    const key = prefixKey('You are a helpful assistant.', 64, 8)!.hash;
    const home = rendezvousOrder(key, cs)[0];
    expect(chooseByAffinity(key, cs, 0.25)).toMatchObject({ chosen: home, rank: 0, deflectedFrom: [] });
    const hot = cs.map((c) => (c.id === home.id ? { ...c, load: { running: 8, waiting: 2 } } : c));
    const moved = chooseByAffinity(key, hot, 0.25)!;
    expect(moved.chosen.id).not.toBe(home.id);
    expect(moved.deflectedFrom).toEqual([home.id]);
  });

  it("counts what this router sent since the scrape, so a burst between scrapes spreads", () => {
    // Scraped empty everywhere; this router has since sent 3 to the home replica.
    const cs = replicas(8).map((c) => ({ ...c, load: { running: 0, waiting: 0 }, inFlightAtScrape: 0 }));
    const key = 12345;
    const home = rendezvousOrder(key, cs)[0];
    const busy = cs.map((c) => (c.id === home.id ? { ...c, inFlight: 3 } : c));
    expect(chooseByAffinity(key, busy, 0.25)!.chosen.id).not.toBe(home.id);
  });

  it('passes over saturated replicas, and gives up only when all are', () => {
    const cs = replicas(3);
    const key = 7;
    const order = rendezvousOrder(key, cs);
    expect(chooseByAffinity(key, cs, 0.25, (c) => c.id === order[0].id)!.chosen.id).toBe(order[1].id);
    expect(chooseByAffinity(key, cs, 0.25, () => true)).toBeUndefined();
    expect(chooseByAffinity(key, [], 0.25)).toBeUndefined();
  });
});

describe('RoundRobin', () => {
  it('takes each candidate in turn', () => {
    const rr = new RoundRobin();
    const cs = ['a', 'b', 'c'];
    expect(Array.from({ length: 6 }, () => rr.choose(cs))).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
  });
});

describe('policyFor', () => {
  it.each([
    [undefined, 'chat', 'prefix-affinity'],
    [undefined, 'completions', 'prefix-affinity'],
    [undefined, 'embeddings', 'least-load'],
    [{ policy: 'round-robin' }, 'chat', 'round-robin'],
    [{ policy: 'least-load' }, 'completions', 'least-load'],
    [{ policy: 'round-robin' }, 'embeddings', 'round-robin'],
    [{ policy: 'prefix-affinity' }, 'embeddings', 'least-load'],
  ] as const)('%j on %s → %s', (routing, api, want) => {
    expect(policyFor(routing, api)).toBe(want);
  });

  it('fills the parameters the catalog left out with the defaults', () => {
    expect(prefixAffinityParams(undefined)).toEqual({ blockChars: 256, maxBlocks: 32, epsilon: 0.25 });
    expect(prefixAffinityParams({ policy: 'prefix-affinity', prefixAffinity: { epsilon: 0.5 } })).toEqual({ blockChars: 256, maxBlocks: 32, epsilon: 0.5 });
  });
});

describe('RecentKeys', () => {
  it('says a key is cold the first time it is placed and warm after', () => {
    const keys = new RecentKeys(4);
    expect(keys.placed(7)).toBe(false);
    expect(keys.placed(7)).toBe(true);
    expect(keys.placed(8)).toBe(false);
    expect(keys.size).toBe(2);
  });

  it('forgets the least recently placed key past its capacity, and never holds more', () => {
    const keys = new RecentKeys(3);
    for (const k of [1, 2, 3]) keys.placed(k);
    keys.placed(1); // 1 placed again: 2 is now the least recent
    expect(keys.placed(4)).toBe(false);
    expect(keys.size).toBe(3);
    expect(keys.placed(2)).toBe(false); // forgotten (and placed again, which forgets 3)
    expect(keys.placed(1)).toBe(true);
    expect(keys.placed(4)).toBe(true);
    expect(keys.placed(3)).toBe(false);
    for (let k = 100; k < 10_000; k++) keys.placed(k);
    expect(keys.size).toBe(3);
  });
});
