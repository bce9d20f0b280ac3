import type { Readiness } from '@llmgw/engines';

/** How to wait for an engine to become ready. Times in milliseconds. */
export interface ReadinessProbeOptions {
  /** The engine's health URL, e.g. `http://127.0.0.1:8000/health`. */
  readonly url: string;
  readonly readiness: Readiness;
  /** Give up after this long. */
  readonly deadlineMs: number;
  /** Pause between attempts. */
  readonly intervalMs: number;
  /** Stops waiting (the engine exited, or the replica is being stopped). */
  readonly signal: AbortSignal;
}

/** Ready, or why not (deadline passed with what was seen last, or aborted). */
export type ReadinessOutcome = { readonly ready: true } | { readonly ready: false; readonly aborted: boolean; readonly reason: string };

const ATTEMPT_TIMEOUT_MS = 2_000;

/**
 * Polls the engine's health endpoint until it answers 200, following the engine's semantics:
 * `refuses-until-ready` (vLLM) refuses connections while loading; `http-503-until-ready`
 * (llama.cpp) accepts them and answers 503. Anything but 200 is "not yet" in both cases, and the
 * last observation is named when the deadline passes.
 */
export async function waitUntilReady(options: ReadinessProbeOptions): Promise<ReadinessOutcome> {
  const started = performance.now();
  let last = 'no answer yet';
  for (;;) {
    if (options.signal.aborted) return { ready: false, aborted: true, reason: String(options.signal.reason ?? 'aborted') };
    try {
      const res = await fetch(options.url, { signal: AbortSignal.any([options.signal, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]) });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status === 200) return { ready: true };
      last =
        res.status === 503 && options.readiness === 'http-503-until-ready' ? 'still loading (HTTP 503)' : `answered HTTP ${res.status}`;
    } catch (error) {
      if (options.signal.aborted) continue;
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      last = cause === 'ECONNREFUSED' ? 'refusing connections (still loading)' : `unreachable (${cause ?? (error as Error).message})`;
    }
    const left = options.deadlineMs - (performance.now() - started);
    if (left <= 0) return { ready: false, aborted: false, reason: `not ready within ${options.deadlineMs} ms: ${last} at ${options.url}` };
    await sleep(Math.min(options.intervalMs, left), options.signal);
  }
}

/** How to keep checking a ready engine. Times in milliseconds. */
export interface LivenessOptions {
  /** The engine's health URL. */
  readonly url: string;
  /** Pause between checks. */
  readonly intervalMs: number;
  /** One check fails when no 200 has arrived within this long. */
  readonly timeoutMs: number;
  /** Consecutive failed checks that make the engine unresponsive; at least 1. */
  readonly failures: number;
  /** Stops watching (the engine exited, or the replica is being stopped or restarted). */
  readonly signal: AbortSignal;
}

/** Why watching ended: the engine stopped answering (with what was seen last), or it was aborted. */
export type LivenessOutcome = { readonly aborted: true } | { readonly aborted: false; readonly reason: string };

/**
 * Checks a ready engine's health endpoint every `intervalMs` until `failures` checks in a row got
 * no 200 within `timeoutMs` — a frozen (SIGSTOPped), deadlocked or wedged engine, which keeps its
 * process and often its port — and then names the last failure. A 200 resets the count.
 */
export async function watchLiveness(options: LivenessOptions): Promise<LivenessOutcome> {
  let failed = 0;
  for (;;) {
    await sleep(options.intervalMs, options.signal);
    if (options.signal.aborted) return { aborted: true };
    let last: string | undefined;
    try {
      const res = await fetch(options.url, { signal: AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]) });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status !== 200) last = `answered HTTP ${res.status}`;
    } catch (error) {
      if (options.signal.aborted) return { aborted: true };
      const e = error as { name?: string; cause?: { code?: string } };
      last = e.name === 'TimeoutError' ? `no answer within ${options.timeoutMs} ms` : `unreachable (${e.cause?.code ?? (error as Error).message})`;
    }
    failed = last === undefined ? 0 : failed + 1;
    if (last !== undefined && failed >= options.failures) {
      return { aborted: false, reason: `engine unresponsive: ${failed} health check(s) in a row failed, the last with ${last} at ${options.url}` };
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
