import { readFileSync } from 'node:fs';
import { fixturePath } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { MAX_SLOTS, parseLlamaSlots, SlotsParseError } from './llama-slots.parser';

/** A committed fixture without its provenance line (line 1). */
const fixture = (name: string): string => readFileSync(fixturePath('llamacpp', name), 'utf8').replace(/^\/\/ source:[^\n]*\n/, '');

/** llama.cpp's README example: two slots, both `is_processing: true` (current builds). */
const README_2_BUSY = fixture('llama_server_slots_readme_2_busy.json.txt');
/** An older README example: one slot with `state: 1` and no `is_processing`. */
const README_STATE = fixture('llama_server_slots_readme_state_field.json.txt');

/** The README example with slot `i` made idle the way llama-server shows it (`id_task: -1`, `is_processing: false`). */
function withIdle(...indices: number[]): string {
  const slots = JSON.parse(README_2_BUSY) as Record<string, unknown>[];
  for (const i of indices) Object.assign(slots[i], { id_task: -1, is_processing: false });
  return JSON.stringify(slots);
}

describe('parseLlamaSlots', () => {
  it.each([
    ['the README example (2 slots, both busy)', README_2_BUSY, { running: 2, capacity: 2 }],
    ['one of its slots idle', withIdle(1), { running: 1, capacity: 2 }],
    ['both idle', withIdle(0, 1), { running: 0, capacity: 2 }],
    ['an older build (state 1, no is_processing)', README_STATE, { running: 1, capacity: 1 }],
  ])('%s', (_name, text, expected) => {
    expect(parseLlamaSlots(text)).toEqual(expected);
  });

  it.each([
    [0, false],
    [1, true],
    [2, true],
    [3, true],
  ])('older builds: state %d means busy=%s', (state, busy) => {
    expect(parseLlamaSlots(JSON.stringify([{ id: 0, state }])).running).toBe(busy ? 1 : 0);
  });

  it('is_processing wins over state when a build sends both', () => {
    expect(parseLlamaSlots(JSON.stringify([{ id: 0, is_processing: false, state: 3 }]))).toEqual({ running: 0, capacity: 1 });
  });

  it('takes MAX_SLOTS slots and refuses one more', () => {
    const slots = (n: number): string => JSON.stringify(Array.from({ length: n }, (_, id) => ({ id, is_processing: id % 2 === 0 })));
    expect(parseLlamaSlots(slots(MAX_SLOTS))).toEqual({ running: MAX_SLOTS / 2, capacity: MAX_SLOTS });
    expect(() => parseLlamaSlots(slots(MAX_SLOTS + 1))).toThrow(/more than 4096/);
  });

  it.each([
    ['empty text', '', /not JSON/],
    ['HTML from a proxy', '<html><body>502 Bad Gateway</body></html>', /not JSON/],
    ['truncated JSON', README_2_BUSY.slice(0, 200), /not JSON/],
    ['a 501 error body', '{"error":{"code":501,"message":"This server does not support slots endpoint.","type":"not_supported_error"}}', /not an array of slots but object/],
    ['null', 'null', /not an array of slots but null/],
    ['a number', '4', /not an array of slots but number/],
    ['an empty array', '[]', /no slots listed/],
    ['a slot that is null', '[null]', /slot 0 is not an object/],
    ['a slot that is an array', '[{"id":0,"is_processing":true},[true]]', /slot 1 is not an object/],
    ['a slot with neither field', '[{"id":0,"id_task":-1,"n_ctx":4096}]', /slot 0 has neither is_processing nor state/],
    ['is_processing as a string', '[{"id":0,"is_processing":"true"}]', /is_processing is not a boolean: "true"/],
    ['is_processing as 1', '[{"id":0,"is_processing":1}]', /is_processing is not a boolean: 1/],
    ['is_processing null', '[{"id":0,"is_processing":null}]', /is_processing is not a boolean: null/],
    ['state as a string', '[{"id":0,"state":"0"}]', /state is not an integer/],
    ['state negative', '[{"id":0,"state":-1}]', /state is not an integer/],
    ['state fractional', '[{"id":0,"state":0.5}]', /state is not an integer/],
    ['a bad slot after good ones', '[{"id":0,"is_processing":false},{"id":1,"is_processing":true},{"id":2}]', /slot 2 has neither/],
  ])('refuses %s', (_name, text, reason) => {
    expect(() => parseLlamaSlots(text)).toThrow(SlotsParseError);
    expect(() => parseLlamaSlots(text)).toThrow(reason);
  });

  it('does not take fields from the prototype chain', () => {
    expect(() => parseLlamaSlots('[{"__proto__":{"is_processing":true}}]')).toThrow(/neither/);
  });
});
