import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ENGINE_KINDS, type EngineKind, type EngineLoad, type MetricMapping } from '@llmgw/domain';
import { PrometheusParseError, defaultMapping, readLoad } from '@llmgw/metrics-mappings';
import { EXIT_FAILURE, EXIT_OK, UsageError, type CliCommand, type CliIo } from '../cli-io';

export interface ScrapeCommandOptions {
  /** How long a URL may take to answer completely, milliseconds. */
  readonly timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 5_000;
/** What the router asks engines for: the text format the parser reads (not OpenMetrics). */
const ACCEPT = 'text/plain; version=0.0.4; q=1, */*; q=0.1';

/** Thrown for I/O or parse failures: printed as `llmgw scrape: <message>`, exit 1. */
class ScrapeFailure extends Error {}

async function fetchText(url: string, timeoutMs: number): Promise<string> {
  let res: Response;
  try {
    res = await fetch(url, { headers: { accept: ACCEPT }, signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) {
      await res.body?.cancel();
      throw new ScrapeFailure(`GET ${url}: HTTP ${res.status} ${res.statusText}`.trimEnd());
    }
    return await res.text();
  } catch (e) {
    if (e instanceof ScrapeFailure) throw e;
    const err = e as Error & { cause?: { message?: string; code?: string } };
    if (err.name === 'TimeoutError' || err.name === 'AbortError') throw new ScrapeFailure(`GET ${url}: no complete answer within ${timeoutMs} ms`);
    const cause = err.cause?.code ?? err.cause?.message;
    throw new ScrapeFailure(`GET ${url}: ${err.message}${cause ? ` (${cause})` : ''}`);
  }
}

async function readSource(source: string, io: CliIo, timeoutMs: number): Promise<string> {
  if (/^https?:\/\//i.test(source)) return fetchText(source, timeoutMs);
  let file: string;
  try {
    file = /^file:/i.test(source) ? fileURLToPath(source) : resolve(io.cwd, source);
  } catch (e) {
    throw new UsageError(`not a file or http(s) URL: ${source} (${(e as Error).message})`);
  }
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new ScrapeFailure(`${source}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
}

function table(load: EngineLoad, mapping: MetricMapping): string {
  const rows: Array<[string, string, string]> = [
    ['running', load.running === undefined ? '-' : String(load.running), mapping.running ?? '-'],
    ['waiting', load.waiting === undefined ? '-' : String(load.waiting), mapping.waiting ?? '-'],
    ['kvUsage', load.kvUsage === undefined ? '-' : String(load.kvUsage), mapping.kvUsage?.length ? mapping.kvUsage.join(' | ') : '-'],
  ];
  const all: Array<[string, string, string]> = [['FIELD', 'VALUE', 'METRIC'], ...rows];
  const w0 = Math.max(...all.map((r) => r[0].length));
  const w1 = Math.max(...all.map((r) => r[1].length));
  return all.map((r) => `${r[0].padEnd(w0)}  ${r[1].padEnd(w1)}  ${r[2]}`).join('\n') + '\n';
}

/** `llmgw scrape`: what llmgw reads from an engine's /metrics, from a file or a URL. */
export function createScrapeCommand(opts: ScrapeCommandOptions = {}): CliCommand {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return {
    path: ['scrape'],
    summary: "show the load llmgw reads from an engine's /metrics (running, waiting, kvUsage)",
    usage: 'llmgw scrape --engine vllm|llamacpp FILE|URL [--model NAME] [--json]',
    async run(argv, io) {
      const { values, positionals } = parseArgs({
        args: argv,
        allowPositionals: true,
        strict: true,
        options: { engine: { type: 'string' }, model: { type: 'string' }, json: { type: 'boolean' } },
      });
      const engine = values.engine;
      if (engine === undefined) throw new UsageError('--engine is required');
      if (!(ENGINE_KINDS as readonly string[]).includes(engine)) {
        throw new UsageError(`unknown engine '${engine}' (want one of: ${ENGINE_KINDS.join(', ')})`);
      }
      if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'FILE or URL is required' : `one FILE or URL, got ${positionals.length}`);
      if (values.model === '') throw new UsageError('--model must not be empty');
      const source = positionals[0];
      const mapping = defaultMapping(engine as EngineKind);
      try {
        const text = await readSource(source, io, timeoutMs);
        const load = readLoad(text, mapping, { modelName: values.model });
        io.out(values.json ? JSON.stringify(load) + '\n' : table(load, mapping));
        return EXIT_OK;
      } catch (e) {
        if (e instanceof PrometheusParseError) {
          io.err(`llmgw scrape: ${source}: not a Prometheus text exposition: line ${e.line}: ${e.reason}\n`);
          return EXIT_FAILURE;
        }
        if (e instanceof ScrapeFailure) {
          io.err(`llmgw scrape: ${e.message}\n`);
          return EXIT_FAILURE;
        }
        throw e;
      }
    },
  };
}

export const scrapeCommand: CliCommand = createScrapeCommand();
