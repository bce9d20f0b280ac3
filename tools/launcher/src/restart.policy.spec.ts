import { describe, expect, it } from 'vitest';
import { decideRestart, DEFAULT_RESTART_POLICY, EXIT_CONFIG } from './restart.policy';

describe('decideRestart', () => {
  it.each([
    { name: 'first exit', earlier: [], now: 100_000, delay: 1_000, recent: 1 },
    { name: 'second within the window', earlier: [99_000], now: 100_000, delay: 2_000, recent: 2 },
    { name: 'fourth within the window', earlier: [90_000, 95_000, 99_000], now: 100_000, delay: 8_000, recent: 4 },
    { name: 'earlier exits outside the window are forgotten', earlier: [10_000, 20_000, 30_000, 39_999], now: 100_000, delay: 1_000, recent: 1 },
    { name: 'an exit exactly at the window edge still counts', earlier: [40_000], now: 100_000, delay: 2_000, recent: 2 },
  ])('restarts after a backoff: $name', ({ earlier, now, delay, recent }) => {
    expect(decideRestart(earlier, now, 1)).toEqual({ restart: true, delayMs: delay, recentExits: recent });
  });

  it('gives up at the fifth exit within the window, saying why', () => {
    expect(decideRestart([60_000, 70_000, 80_000, 90_000], 100_000, 1)).toEqual({ restart: false, reason: 'it exited 5 times within 60 s' });
  });

  it('never restarts an app that exited with EX_CONFIG', () => {
    const d = decideRestart([], 0, EXIT_CONFIG);
    expect(d.restart).toBe(false);
    expect(d.restart === false && d.reason).toContain('code 78');
  });

  it('restarts an app killed by a signal (exit code null)', () => {
    expect(decideRestart([], 0, null)).toMatchObject({ restart: true, delayMs: 1_000 });
  });

  it('caps the delay', () => {
    const opts = { ...DEFAULT_RESTART_POLICY, maxExitsInWindow: 100, maxDelayMs: 5_000 };
    const earlier = Array.from({ length: 20 }, (_, i) => 1_000 + i);
    expect(decideRestart(earlier, 2_000, 1, opts)).toMatchObject({ restart: true, delayMs: 5_000 });
  });
});
