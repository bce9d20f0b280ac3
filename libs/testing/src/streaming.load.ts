// Closed-loop streaming clients: each sends a streamed chat completion, reads it to the end, and
// sends the next, recording how every request ended and when.

/** How one streamed request ended. */
export type StreamOutcome =
  /** 200, content, `data: [DONE]`, no error event. */
  | 'ok'
  /** Ended before any content arrived: an error status, or the connection failed. */
  | 'failed'
  /** Content arrived, then the stream ended without `[DONE]` (with or without an error event). */
  | 'cut'
  /** No byte for longer than the stall deadline: aborted by the client. */
  | 'hung';

/** One request, times from `performance.now()` (ms). */
export interface StreamRecord {
  readonly client: number;
  readonly startedAt: number;
  firstByteAt?: number;
  endedAt: number;
  outcome: StreamOutcome;
  /** An SSE `data: {"error": ...}` event was received. */
  errorEvent: boolean;
  /** Reading the body failed (the connection ended before the response did), as a client sees a cut. */
  connectionError: boolean;
  status?: number;
  detail?: string;
  chunks: number;
}

/** What the clients send and how long they wait. */
export interface LoadOptions {
  readonly url: string;
  readonly model: string;
  readonly clients: number;
  /** Stop starting new requests at this `performance.now()` time, or once this returns true. */
  readonly until: number | (() => boolean);
  readonly maxTokens: number;
  /** A request that receives nothing for this long counts as hung (and is aborted). */
  readonly stallDeadlineMs: number;
}

/** Runs the clients until `until`, then waits for every request in flight; returns all records. */
export async function runStreamingLoad(options: LoadOptions): Promise<StreamRecord[]> {
  return runStreamingLoadInto([], options);
}

/** {@link runStreamingLoad}, pushing each record into `records` as it ends (for a caller watching the load live). */
export async function runStreamingLoadInto(records: StreamRecord[], options: LoadOptions): Promise<StreamRecord[]> {
  const { until } = options;
  const over = typeof until === 'number' ? () => performance.now() >= until : until;
  await Promise.all(
    Array.from({ length: options.clients }, async (_, client) => {
      let n = 0;
      while (!over()) {
        records.push(await streamOnce(options, client, n++));
      }
    }),
  );
  return records;
}

/** One streamed chat completion, classified. Never throws. */
export async function streamOnce(options: Omit<LoadOptions, 'clients' | 'until'>, client: number, n: number): Promise<StreamRecord> {
  const record: StreamRecord = { client, startedAt: performance.now(), endedAt: 0, outcome: 'failed', errorEvent: false, connectionError: false, chunks: 0 };
  const abort = new AbortController();
  let stall: NodeJS.Timeout | undefined;
  let stalled = false;
  const arm = (): void => {
    clearTimeout(stall);
    stall = setTimeout(() => {
      stalled = true;
      abort.abort();
    }, options.stallDeadlineMs);
  };
  arm();
  try {
    const res = await fetch(options.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: options.model,
        stream: true,
        max_tokens: options.maxTokens,
        messages: [{ role: 'user', content: `client ${client} request ${n}: tell me something` }],
      }),
      signal: abort.signal,
    });
    record.status = res.status;
    if (res.status !== 200 || res.body === null) {
      record.detail = (await res.text()).slice(0, 300);
      record.outcome = 'failed';
      return record;
    }
    const decoder = new TextDecoder();
    let buffer = '';
    let done = false;
    const reader = res.body.getReader();
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      arm();
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          try {
            const parsed = JSON.parse(data) as { error?: { message?: string }; choices?: unknown[] };
            if (parsed.error !== undefined) {
              record.errorEvent = true;
              record.detail = parsed.error.message;
            } else {
              record.chunks++;
              record.firstByteAt ??= performance.now();
            }
          } catch {
            record.detail = `unparseable event: ${data.slice(0, 100)}`;
          }
        }
      }
    }
    record.outcome = done && !record.errorEvent ? 'ok' : record.chunks > 0 ? 'cut' : 'failed';
    if (record.outcome !== 'ok') record.detail ??= 'stream ended without [DONE]';
  } catch (error) {
    record.outcome = stalled ? 'hung' : record.chunks > 0 ? 'cut' : 'failed';
    record.connectionError = !stalled;
    record.detail = stalled ? `nothing received for ${options.stallDeadlineMs} ms` : (error as Error).message;
  } finally {
    clearTimeout(stall);
    record.endedAt = performance.now();
  }
  return record;
}
