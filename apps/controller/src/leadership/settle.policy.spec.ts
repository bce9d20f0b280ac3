import { describe, expect, it } from 'vitest';
import { settleDecision, type SettleState } from './settle.policy';

const base = (over: Partial<SettleState> & { back?: string[] }): SettleState => {
  const back = new Set(over.back ?? []);
  return {
    now: 0,
    settleUntil: 20_000,
    holdersUntil: 60_000,
    awaited: new Set(['a', 'b', 'c']),
    holders: new Set(['a', 'b']),
    connected: (id) => back.has(id),
    ...over,
  };
};

describe('settleDecision', () => {
  it.each([
    ['every awaited node back, early', { now: 1_000, back: ['a', 'b', 'c'] }, { settled: true, why: 'all-back' }],
    ['nodes missing inside the window', { now: 19_999, back: ['a'] }, { settled: false }],
    ['window over, only a node without replicas missing', { now: 20_000, back: ['a', 'b'] }, { settled: true, why: 'window-over' }],
    ['window over, a node that held replicas missing: keeps listening', { now: 20_000, back: ['a', 'c'] }, { settled: false }],
    ['that node comes back before the limit', { now: 35_000, back: ['a', 'b'] }, { settled: true, why: 'window-over' }],
    ['the limit reached with it still missing', { now: 60_000, back: ['a', 'c'] }, { settled: true, why: 'holders-limit' }],
    ['nothing awaited (a new store): the whole window', { now: 19_000, awaited: new Set<string>(), holders: new Set<string>() }, { settled: false }],
    ['nothing awaited, window over', { now: 20_000, awaited: new Set<string>(), holders: new Set<string>() }, { settled: true, why: 'window-over' }],
  ])('%s', (_name, over, expected) => {
    expect(settleDecision(base(over))).toMatchObject(expected);
  });

  it('names the awaited nodes still missing', () => {
    expect(settleDecision(base({ now: 60_000, back: ['c'] })).missing).toEqual(['a', 'b']);
  });
});
