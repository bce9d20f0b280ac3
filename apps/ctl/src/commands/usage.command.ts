import { EXIT_OK } from '../cli-io';
import { printJson, serverCommand, type CommandDeps } from '../api/server.command';

interface UsageView {
  since: string;
  rows: { key: string; model: string; hour: string; requests: number; promptTokens: number; completionTokens: number }[];
  totals: { key: string; requests: number; promptTokens: number; completionTokens: number }[];
}

/** `llmgw usage [--key K] [--since 24h]`: requests and tokens per key (and per model and hour with --json). */
export function createUsageCommand(deps: CommandDeps = {}) {
  return serverCommand(
    {
      path: ['usage'],
      summary: 'requests and tokens per API key (per model and hour with --json)',
      usage: 'llmgw usage [--key NAME] [--since 24h|7d|RFC3339] [--json]',
      options: { key: { type: 'string' }, since: { type: 'string' } },
      async run(ctx, values) {
        const query = new URLSearchParams();
        if (typeof values.since === 'string') query.set('since', values.since);
        if (typeof values.key === 'string') query.set('key', values.key);
        const q = query.toString();
        const usage = await ctx.catalog.get<UsageView>(`/v1/usage${q ? `?${q}` : ''}`);
        if (ctx.json) {
          printJson(ctx.io, usage);
          return EXIT_OK;
        }
        const lines = [`usage since ${usage.since}`];
        if (usage.totals.length === 0) lines.push('no usage reported');
        for (const t of usage.totals) {
          const models = [...new Set(usage.rows.filter((r) => r.key === t.key).map((r) => r.model))].sort();
          lines.push(`${t.key}  ${t.requests} requests  ${t.promptTokens} prompt + ${t.completionTokens} completion tokens  (${models.join(', ')})`);
        }
        ctx.io.out(lines.join('\n') + '\n');
        return EXIT_OK;
      },
    },
    deps,
  );
}

export const usageCommand = createUsageCommand();
