/** One entry of llama-server's GET /slots, with the fields the model can fill (names as llama-server's README shows them). */
export interface SlotView {
  readonly id: number;
  /** Context of one slot, tokens. */
  readonly n_ctx: number;
  readonly speculative: false;
  readonly is_processing: boolean;
}

/**
 * llama-server's GET /slots: `parallel` slots (its -np), of which the first `running` are busy.
 * llama-server picks a slot by prompt similarity or least recent use; which ones show busy does
 * not matter to a reader counting them, so here they fill in id order. Fields llama-server adds
 * per slot (`id_task`, `params`, `next_token`, …) are left out: the model has no values for them.
 */
export function renderLlamacppSlots(running: number, o: { parallel: number; slotContext: number }): SlotView[] {
  const busy = Math.min(Math.max(0, running), o.parallel);
  return Array.from({ length: o.parallel }, (_, id) => ({ id, n_ctx: o.slotContext, speculative: false as const, is_processing: id < busy }));
}
