/** What llama-server's `GET /slots` says of its load: busy slots and all slots (its `--parallel`). */
export interface SlotsLoad {
  /** Slots processing a request now (prompt or generation). */
  readonly running: number;
  /** Slots the server has: the sequences it runs at once. Always ≥ 1. */
  readonly capacity: number;
}

/** Most slots a /slots answer may list; more is refused as not a llama-server answer. */
export const MAX_SLOTS = 4096;

/** Why a /slots answer was refused. */
export class SlotsParseError extends Error {
  constructor(reason: string) {
    super(`/slots: ${reason}`);
    this.name = 'SlotsParseError';
  }
}

/** Whether one slot object is busy; throws SlotsParseError naming slot `index` when it says neither way. */
function slotBusy(slot: unknown, index: number): boolean {
  if (typeof slot !== 'object' || slot === null || Array.isArray(slot)) throw new SlotsParseError(`slot ${index} is not an object`);
  const fields = slot as Record<string, unknown>;
  if (Object.prototype.hasOwnProperty.call(fields, 'is_processing')) {
    const v = fields.is_processing;
    if (typeof v !== 'boolean') throw new SlotsParseError(`slot ${index}: is_processing is not a boolean: ${JSON.stringify(v)}`);
    return v;
  }
  if (Object.prototype.hasOwnProperty.call(fields, 'state')) {
    const v = fields.state;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new SlotsParseError(`slot ${index}: state is not an integer ≥ 0: ${JSON.stringify(v)}`);
    return v !== 0;
  }
  throw new SlotsParseError(`slot ${index} has neither is_processing nor state`);
}

/**
 * Reads llama-server's `GET /slots` answer: a JSON array with one object per slot. A slot is
 * busy when `is_processing` is true (current builds) or, where that field is absent (older
 * builds), when `state` is not 0 (0 = idle). Every other field is ignored.
 *
 * Throws SlotsParseError for anything else: text that is not JSON, a JSON value that is not an
 * array, an empty array or one of more than MAX_SLOTS, a slot that is not an object, one with
 * neither field, or a field of the wrong type (`"true"`, `1.5`, `-1`) — never a guess.
 */
export function parseLlamaSlots(text: string): SlotsLoad {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new SlotsParseError(`not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (!Array.isArray(value)) throw new SlotsParseError(`not an array of slots but ${value === null ? 'null' : typeof value}`);
  if (value.length === 0) throw new SlotsParseError('no slots listed');
  if (value.length > MAX_SLOTS) throw new SlotsParseError(`${value.length} slots listed, more than ${MAX_SLOTS}`);
  let running = 0;
  value.forEach((slot: unknown, i: number) => {
    if (slotBusy(slot, i)) running++;
  });
  return { running, capacity: value.length };
}
