import { inspect } from 'node:util';

/** Options for {@link waitFor}. Times in milliseconds. */
export interface WaitForOptions {
  /** Give up after this long (default 5000 ms). */
  deadlineMs?: number;
  /** Pause between attempts (default 25 ms). */
  intervalMs?: number;
  /** What was being waited for; starts the error thrown on deadline. */
  message?: string;
  /** Stops waiting early: the promise rejects with the message and the abort reason. */
  signal?: AbortSignal;
}

/**
 * Polls `condition` until it returns a truthy value and resolves with that value. A condition
 * that throws counts as not yet met. On deadline it rejects with `message`, the deadline and
 * the last value (or the last error) the condition produced, so a failure says what it saw.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<NonNullable<T>> {
  const deadlineMs = options.deadlineMs ?? 5_000;
  const intervalMs = options.intervalMs ?? 25;
  const message = options.message ?? 'condition';
  const deadline = performance.now() + deadlineMs;
  let last: { value: unknown } | { error: unknown } | undefined;
  for (;;) {
    if (options.signal?.aborted) throw new Error(`${message}: gave up (${String(options.signal.reason)})`);
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
      last = { value };
    } catch (error) {
      last = { error };
    }
    const left = deadline - performance.now();
    if (left <= 0) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, left)));
  }
  const seen =
    last === undefined
      ? 'never evaluated'
      : 'error' in last
        ? `last error: ${last.error instanceof Error ? last.error.message : inspect(last.error)}`
        : `last value: ${inspect(last.value, { depth: 4, breakLength: Infinity })}`;
  throw new Error(`${message}: not met within ${deadlineMs} ms; ${seen}`);
}
