import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import type { Clock } from '@llmgw/domain';
import { ProblemError } from '@llmgw/observability';
import type { KeyUsageRow, Store } from '@llmgw/store';
import { AdminTokenGuard } from '../api/admin-token.guard';
import { CATALOG_STORE } from '../store/catalog-store.provider';

/** Injection token of the clock `since` durations count back from. */
export const USAGE_CLOCK = Symbol('llmgw.usage-clock');

/** The usage answer: rows per key, model and hour, and their sums per key. */
export interface UsageView {
  since: string;
  rows: (Omit<KeyUsageRow, 'hour'> & { hour: string })[];
  totals: { key: string; requests: number; promptTokens: number; completionTokens: number }[];
}

const MAX_SINCE_MS = 400 * 86_400_000;
const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Token usage per API key, model and UTC hour under `/v1/usage` (read scope): what routers
 * reported, as the controller stored it. `since` is a duration back from now (`24h`, `30m`,
 * `7d`) or an RFC 3339 time; `key` narrows it to one key.
 */
@Controller('v1/usage')
@UseGuards(AdminTokenGuard)
export class UsageController {
  constructor(
    @Inject(CATALOG_STORE) private readonly store: Pick<Store, 'keyUsage'>,
    @Inject(USAGE_CLOCK) private readonly clock: Clock,
  ) {}

  @Get()
  async usage(@Query('since') since: string | undefined, @Query('key') key: string | undefined): Promise<UsageView> {
    const from = this.sinceOf(since ?? '24h');
    if (key !== undefined && (typeof key !== 'string' || key === '' || key.length > 64)) {
      throw new ProblemError('bad-request', 'key must be one key name', [{ path: 'key', message: 'expected one key name' }]);
    }
    const rows = await this.store.keyUsage.query(from, key);
    const totals = new Map<string, UsageView['totals'][number]>();
    for (const r of rows) {
      const t = totals.get(r.key) ?? { key: r.key, requests: 0, promptTokens: 0, completionTokens: 0 };
      t.requests += r.requests;
      t.promptTokens += r.promptTokens;
      t.completionTokens += r.completionTokens;
      totals.set(r.key, t);
    }
    return {
      since: new Date(from).toISOString(),
      rows: rows.map((r) => ({ ...r, hour: new Date(r.hour).toISOString() })),
      totals: [...totals.values()].sort((a, b) => (a.key < b.key ? -1 : 1)),
    };
  }

  private sinceOf(raw: string): number {
    const now = this.clock.now();
    if (/^\d{4}-\d{2}-\d{2}T/.test(raw) && Number.isFinite(Date.parse(raw))) return Date.parse(raw);
    const m = /^(\d{1,6})(m|h|d)$/.exec(raw);
    const ms = m ? Number(m[1]) * UNIT_MS[m[2]] : undefined;
    if (ms === undefined || ms > MAX_SINCE_MS) {
      throw new ProblemError('bad-request', `since ${JSON.stringify(raw)}: expected a duration back from now (30m, 24h, 7d; at most 400d) or an RFC 3339 time`, [{ path: 'since', message: 'expected a duration such as 24h, or an RFC 3339 time' }]);
    }
    return now - ms;
  }
}
