// When the launcher restarts an app that ended on its own, and when it gives up: pure, so the
// rule is tested without processes or clocks.

/** How the policy is tuned; all durations in milliseconds. */
export interface RestartPolicyOptions {
  /** Delay before the first restart; each further exit inside the window doubles it. */
  readonly initialDelayMs: number;
  /** The delay never grows past this. */
  readonly maxDelayMs: number;
  /** Exits that count as "repeated": those at most this long ago. */
  readonly windowMs: number;
  /** This many exits inside the window (the current one included) and the launcher gives up. */
  readonly maxExitsInWindow: number;
}

/** The launcher's defaults: 1 s, 2 s, 4 s, 8 s, then giving up at the 5th exit within a minute. */
export const DEFAULT_RESTART_POLICY: RestartPolicyOptions = { initialDelayMs: 1_000, maxDelayMs: 16_000, windowMs: 60_000, maxExitsInWindow: 5 };

/**
 * Exit code 78 (EX_CONFIG) is how an app says that starting it again cannot help: a setting is
 * invalid or a credential was refused. It is never restarted.
 */
export const EXIT_CONFIG = 78;

/** What to do about an app that ended without being asked to. */
export type RestartDecision =
  | { readonly restart: true; readonly delayMs: number; /** Exits inside the window, this one included. */ readonly recentExits: number }
  | { readonly restart: false; readonly reason: string };

/**
 * Decides for one app, given the times (ms, any monotonic origin) of its earlier unrequested
 * exits, the time of this one and its exit code. Exits older than the window are forgotten, so an
 * app that ran fine for a while starts again at the initial delay.
 */
export function decideRestart(earlierExitsAt: readonly number[], now: number, exitCode: number | null, options: RestartPolicyOptions = DEFAULT_RESTART_POLICY): RestartDecision {
  if (exitCode === EXIT_CONFIG) return { restart: false, reason: `it exited with code ${EXIT_CONFIG} (a setting or credential it cannot work with): fix that and start again` };
  const recentExits = earlierExitsAt.filter((at) => now - at <= options.windowMs).length + 1;
  if (recentExits >= options.maxExitsInWindow) {
    return { restart: false, reason: `it exited ${recentExits} times within ${Math.round(options.windowMs / 1000)} s` };
  }
  const delayMs = Math.min(options.maxDelayMs, options.initialDelayMs * 2 ** (recentExits - 1));
  return { restart: true, delayMs, recentExits };
}
