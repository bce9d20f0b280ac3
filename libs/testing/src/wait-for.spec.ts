import { describe, expect, it } from 'vitest';
import { waitFor } from './wait-for';

describe('waitFor', () => {
  it('resolves with the first truthy value', async () => {
    let calls = 0;
    const value = await waitFor(() => (++calls >= 3 ? { calls } : undefined), { intervalMs: 1 });
    expect(value).toEqual({ calls: 3 });
  });

  it('awaits async conditions and treats a throw as not yet met', async () => {
    let calls = 0;
    const value = await waitFor(
      async () => {
        calls += 1;
        if (calls < 3) throw new Error('not yet');
        return 'done';
      },
      { intervalMs: 1 },
    );
    expect(value).toBe('done');
  });

  it('fails at the deadline with the message and the last value seen', async () => {
    let n = 0;
    const started = performance.now();
    await expect(
      waitFor(() => (++n < 0 ? 'never' : undefined), { deadlineMs: 120, intervalMs: 10, message: 'queue drained' }),
    ).rejects.toThrow(/^queue drained: not met within 120 ms; last value: undefined$/);
    expect(n).toBeGreaterThan(2);
    expect(performance.now() - started).toBeGreaterThanOrEqual(110);
    await expect(waitFor(() => 0, { deadlineMs: 20, message: 'depth is zero' })).rejects.toThrow(
      'depth is zero: not met within 20 ms; last value: 0',
    );
  });

  it('fails at the deadline naming the last error', async () => {
    await expect(
      waitFor(
        () => {
          throw new Error('connection refused');
        },
        { deadlineMs: 30, message: 'server up' },
      ),
    ).rejects.toThrow('server up: not met within 30 ms; last error: connection refused');
  });

  it('stops early when aborted', async () => {
    const abort = new AbortController();
    setTimeout(() => abort.abort('process exited'), 20);
    await expect(waitFor(() => false, { deadlineMs: 5_000, signal: abort.signal, message: 'ready' })).rejects.toThrow(
      'ready: gave up (process exited)',
    );
  });
});
