/** Token counts of one response, as the engine's OpenAI `usage` gives them. */
export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** The token counts of an OpenAI `usage` object; undefined when it is not one. */
export function usageOf(value: unknown): TokenUsage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { prompt_tokens: prompt, completion_tokens: completion } = value as { prompt_tokens?: unknown; completion_tokens?: unknown };
  const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined);
  const p = count(prompt);
  const c = count(completion) ?? 0; // embeddings have no completion tokens
  return p === undefined ? undefined : { promptTokens: p, completionTokens: c };
}

const STREAM_KEY = Buffer.from('"stream"');

/**
 * The body to send to the engine for a request, so that its usage can be counted: a stream that
 * did not ask for `stream_options.include_usage` asks for it, and `strip` says that the usage
 * chunk the engine adds must be taken out again, so the client gets exactly the stream it asked
 * for. Any other body is sent as it came (`strip` false). `body` is valid JSON (the scanner checked).
 */
export function askForStreamUsage(body: Buffer): { body: Buffer; strip: boolean } {
  if (body.indexOf(STREAM_KEY) < 0) return { body, strip: false };
  const doc = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  if (doc.stream !== true) return { body, strip: false };
  const options = doc.stream_options;
  if (options !== undefined && options !== null && (typeof options !== 'object' || Array.isArray(options))) return { body, strip: false }; // the engine refuses it
  if ((options as { include_usage?: unknown } | null | undefined)?.include_usage === true) return { body, strip: false };
  doc.stream_options = { ...((options as object | null | undefined) ?? {}), include_usage: true };
  return { body: Buffer.from(JSON.stringify(doc), 'utf8'), strip: true };
}

const USAGE_KEY = Buffer.from('"usage"');
const EVENT_END = /\r?\n\r?\n/g;

/**
 * Watches an SSE response on its way to the client: notes the `usage` of the stream's usage
 * chunk, and with `strip` drops that event (the one with `"choices": []` and a usage object),
 * passing every other byte through unchanged and in order. With `strip` an event is held until it
 * is complete (engines write whole events, so this adds no delay); without it every byte is
 * passed on at once and only a copy of an incomplete event is kept.
 */
export class SseUsageTap {
  private pending = Buffer.alloc(0);
  private found: TokenUsage | undefined;

  constructor(private readonly strip: boolean) {}

  /** The usage the stream reported, once its usage chunk went by. */
  get usage(): TokenUsage | undefined {
    return this.found;
  }

  /** The bytes of `chunk` (with what was held) to forward now. */
  push(chunk: Buffer): Buffer {
    const data = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const text = data.toString('latin1'); // byte offsets stay byte offsets
    let out: Buffer[] | undefined;
    let start = 0;
    let kept = 0;
    EVENT_END.lastIndex = 0;
    for (let m = EVENT_END.exec(text); m !== null; m = EVENT_END.exec(text)) {
      const end = m.index + m[0].length;
      const event = data.subarray(start, end);
      if (this.isUsageEvent(event) && this.strip) {
        out ??= [];
        out.push(data.subarray(kept, start));
        kept = end;
      }
      start = end;
    }
    this.pending = Buffer.from(data.subarray(start));
    if (!this.strip) {
      // Everything goes on now; only the incomplete event is kept, to be read when it completes.
      return chunk;
    }
    const upTo = start;
    if (out === undefined) return data.subarray(0, upTo);
    out.push(data.subarray(kept, upTo));
    return Buffer.concat(out);
  }

  /** The stream ended: what is still held (an incomplete last event), read for usage too. */
  end(): Buffer {
    const rest = this.pending;
    this.pending = Buffer.alloc(0);
    if (rest.length > 0 && this.isUsageEvent(rest) && this.strip) return Buffer.alloc(0);
    return this.strip ? rest : Buffer.alloc(0);
  }

  private isUsageEvent(event: Buffer): boolean {
    if (event.indexOf(USAGE_KEY) < 0) return false;
    const line = event
      .toString('utf8')
      .split(/\r?\n/)
      .find((l) => l.startsWith('data:'));
    if (line === undefined) return false;
    let doc: unknown;
    try {
      doc = JSON.parse(line.slice(5).trim());
    } catch {
      return false;
    }
    const { choices, usage } = (doc ?? {}) as { choices?: unknown; usage?: unknown };
    const counts = usageOf(usage);
    if (counts === undefined) return false;
    this.found = counts;
    return Array.isArray(choices) && choices.length === 0;
  }
}

const TAIL_BYTES = 8_192;

/**
 * Collects the end of a plain JSON response and reads its top-level `usage` from it when it ends
 * (OpenAI puts `usage` last; llama.cpp puts `timings` after it, which the tail still holds).
 * Holds at most TAIL_BYTES, whatever the size of the response.
 */
export class JsonUsageTail {
  private tail = Buffer.alloc(0);

  push(chunk: Buffer): void {
    const joined = this.tail.length === 0 ? chunk : Buffer.concat([this.tail, chunk]);
    this.tail = joined.length > TAIL_BYTES ? Buffer.from(joined.subarray(joined.length - TAIL_BYTES)) : Buffer.from(joined);
  }

  /** The usage of the response, when its tail holds a usage object. */
  usage(): TokenUsage | undefined {
    const text = this.tail.toString('utf8');
    const at = text.lastIndexOf('"usage"');
    if (at < 0) return undefined;
    const open = text.indexOf('{', at);
    if (open < 0) return undefined;
    let depth = 0;
    for (let i = open; i < text.length; i++) {
      const c = text[i];
      if (c === '"') {
        i++;
        while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      } else if (c === '{') depth++;
      else if (c === '}' && --depth === 0) {
        try {
          return usageOf(JSON.parse(text.slice(open, i + 1)));
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  }
}
