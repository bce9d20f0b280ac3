import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';

/** Facts a check shows beside its answer (e.g. how stale the router's routing table is). */
export type CheckDetail = Readonly<Record<string, string | number | boolean>>;

/** A check's answer: ready or not, why not, and what it saw. */
export type ReadinessResult = boolean | { ready: boolean; reason?: string; detail?: CheckDetail };

/** A named readiness condition; may be async. A throw or a check slower than 2 s counts as not ready. */
export type ReadinessCheck = () => ReadinessResult | Promise<ReadinessResult>;

/** One check's state in a report; `reason` only when not ready; `detail` when the check gave one. */
export interface CheckState {
  ready: boolean;
  reason?: string;
  detail?: CheckDetail;
}

/** What /readyz answers: ready only when every check is. */
export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, CheckState>;
}

/** A check that is closed until `open()` — e.g. the router's "first snapshot received". */
export interface ReadinessGate {
  open(): void;
  close(reason: string): void;
  readonly isOpen: boolean;
}

const CHECK_TIMEOUT_MS = 2_000;

/**
 * Readiness of this process as the sum of named checks that features register (the router's
 * first snapshot, the store connection, ...). With no checks it is ready. Once the application
 * begins shutting down it reports `shutdown` not ready, so load balancers stop sending work
 * before the listener closes.
 */
@Injectable()
export class ReadinessService implements BeforeApplicationShutdown {
  private readonly checks = new Map<string, ReadinessCheck>();
  private shuttingDown = false;

  /** Adds a named check; a name may be registered once. */
  register(name: string, check: ReadinessCheck): void {
    if (this.checks.has(name)) throw new Error(`readiness check "${name}" is already registered`);
    this.checks.set(name, check);
  }

  /** Registers a gate named `name`, closed with `reason` until opened. */
  gate(name: string, reason: string): ReadinessGate {
    let state: CheckState = { ready: false, reason };
    this.register(name, () => state);
    return {
      open: () => (state = { ready: true }),
      close: (why: string) => (state = { ready: false, reason: why }),
      get isOpen() {
        return state.ready;
      },
    };
  }

  /** Runs every check (concurrently, each bounded to 2 s) and reports. */
  async evaluate(): Promise<ReadinessReport> {
    const names = [...this.checks.keys()];
    const states = await Promise.all(names.map((name) => runCheck(this.checks.get(name) as ReadinessCheck)));
    const checks: Record<string, CheckState> = {};
    names.forEach((name, i) => (checks[name] = states[i]));
    if (this.shuttingDown) checks['shutdown'] = { ready: false, reason: 'shutting down' };
    return { ready: Object.values(checks).every((c) => c.ready), checks };
  }

  beforeApplicationShutdown(): void {
    this.shuttingDown = true;
  }
}

async function runCheck(check: ReadinessCheck): Promise<CheckState> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
    });
    const result = await Promise.race([Promise.resolve().then(check), timeout]);
    if (typeof result === 'boolean') return result ? { ready: true } : { ready: false, reason: 'not ready' };
    const detail = result.detail !== undefined ? { detail: result.detail } : {};
    return result.ready ? { ready: true, ...detail } : { ready: false, reason: result.reason ?? 'not ready', ...detail };
  } catch (error) {
    return { ready: false, reason: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}
