import { parseLlamaSlots } from '@llmgw/metrics-mappings';
import { describe, expect, it } from 'vitest';
import { renderLlamacppSlots } from './slots.renderer';

describe('renderLlamacppSlots', () => {
  it('lists one slot per -np slot, the first `running` busy', () => {
    expect(renderLlamacppSlots(2, { parallel: 3, slotContext: 4096 })).toEqual([
      { id: 0, n_ctx: 4096, speculative: false, is_processing: true },
      { id: 1, n_ctx: 4096, speculative: false, is_processing: true },
      { id: 2, n_ctx: 4096, speculative: false, is_processing: false },
    ]);
  });

  it.each([
    [0, 4, { running: 0, capacity: 4 }],
    [4, 4, { running: 4, capacity: 4 }],
    [9, 4, { running: 4, capacity: 4 }],
    [-1, 1, { running: 0, capacity: 1 }],
  ])('running %d of %d reads back through the router parser as %j', (running, parallel, expected) => {
    expect(parseLlamaSlots(JSON.stringify(renderLlamacppSlots(running, { parallel, slotContext: 512 })))).toEqual(expected);
  });
});
