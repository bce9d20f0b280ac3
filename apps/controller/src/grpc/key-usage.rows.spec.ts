import { describe, expect, it } from 'vitest';
import { keyUsageRows } from './router.calls';

const now = Date.UTC(2026, 11, 2, 10, 30);
const hour = Date.UTC(2026, 11, 2, 10);
const row = (over: Record<string, unknown> = {}) => ({ key: 'search', model: 'llama', hourUnixMs: hour, requests: 2, promptTokens: 10, completionTokens: 3, ...over });

describe('keyUsageRows', () => {
  it('keeps sane rows and drops what a buggy or hostile router could send', () => {
    const { rows, dropped } = keyUsageRows(
      {
        routerId: 'r',
        lastUsedUnixMs: {},
        keyUsage: [
          row(),
          row({ key: '' }),
          row({ key: 'k'.repeat(65) }),
          row({ hourUnixMs: hour + 5 }),
          row({ hourUnixMs: hour + 48 * 3_600_000 }),
          row({ hourUnixMs: 0 }),
          row({ requests: 0 }),
          row({ promptTokens: 2 ** 60 }),
        ],
      },
      now,
    );
    expect(rows).toEqual([{ key: 'search', model: 'llama', hour, requests: 2, promptTokens: 10, completionTokens: 3 }]);
    expect(dropped).toBe(7);
  });
});
