// Turns the apps' pino JSON lines into one readable stream: `[router]     info  msg  key=value`.

/** pino's numeric levels, for lines written without the word formatter. */
const PINO_LEVELS: Readonly<Record<number, string>> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** Keys every app line carries that say nothing to a person reading the stream. */
const NOISE_KEYS = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg', 'v']);

/**
 * Nest's start-up chatter (one line per module and per route): useful when debugging Nest, noise
 * in a stream a person reads. Dropped at info level and below; warnings from them still show.
 */
const BOOT_NOISE_CONTEXTS = new Set(['RouterExplorer', 'RoutesResolver', 'InstanceLoader', 'NestFactory', 'NestApplication']);

/** Longest value shown for one extra field; longer ones are cut with an ellipsis. */
const MAX_FIELD_CHARS = 80;

const ANSI = { reset: '\x1b[0m', dim: '\x1b[2m', red: '\x1b[31m', yellow: '\x1b[33m', magenta: '\x1b[35m' } as const;
const APP_COLORS = ['\x1b[36m', '\x1b[32m', '\x1b[34m', '\x1b[35m', '\x1b[33m', '\x1b[96m', '\x1b[92m'];

/** How lines are decorated: ANSI colours (a terminal) or plain text (a file, a pipe, a test). */
export interface LogFormatOptions {
  readonly color: boolean;
  /** Width the `[name]` prefix is padded to, so messages line up. */
  readonly prefixWidth: number;
  /** Colour index of this stream's prefix (e.g. its position in the list of apps). */
  readonly colorIndex?: number;
}

/**
 * One output line for one input line of `source` (an app's stdout or stderr). A pino JSON object
 * is condensed to level, message, `(context)` and its other short fields; an `err` shows its
 * message and, for errors, the first stack frame. Anything else (an engine's own output, a config
 * error) is shown as is. Nest's info-level start-up lines give undefined (not shown). Never
 * throws; the result has no trailing newline.
 */
export function formatLogLine(source: string, line: string, options: LogFormatOptions): string | undefined {
  const paint = (code: string, text: string): string => (options.color ? `${code}${text}${ANSI.reset}` : text);
  const appColor = APP_COLORS[(options.colorIndex ?? 0) % APP_COLORS.length];
  const prefix = paint(appColor, `[${source}]`.padEnd(options.prefixWidth + 2));
  const record = parseJsonObject(line);
  if (record === undefined) return `${prefix} ${line.trimEnd()}`;

  const level = levelName(record.level);
  if (typeof record.context === 'string' && BOOT_NOISE_CONTEXTS.has(record.context) && ['trace', 'debug', 'info'].includes(level)) return undefined;
  const levelText = level.padEnd(5);
  const levelShown =
    level === 'error' || level === 'fatal' ? paint(ANSI.red, levelText) : level === 'warn' ? paint(ANSI.yellow, levelText) : paint(ANSI.dim, levelText);
  const context = typeof record.context === 'string' ? paint(ANSI.dim, ` (${record.context})`) : '';
  const msg = typeof record.msg === 'string' ? record.msg : '';
  const fields: string[] = [];
  for (const [key, value] of Object.entries(record)) {
    if (NOISE_KEYS.has(key) || key === 'context' || value === undefined || value === null) continue;
    if (key === 'err' || key === 'error') {
      fields.push(`${key}=${describeError(value)}`);
      continue;
    }
    fields.push(`${key}=${short(value)}`);
  }
  const tail = fields.length > 0 ? `  ${paint(ANSI.dim, fields.join(' '))}` : '';
  return `${prefix} ${levelShown} ${msg}${context}${tail}`;
}

/** The launcher's own lines, in the same shape as the apps'. */
export function formatOwnLine(text: string, options: LogFormatOptions): string {
  const prefix = options.color ? `${ANSI.magenta}${'[llmgw]'.padEnd(options.prefixWidth + 2)}${ANSI.reset}` : '[llmgw]'.padEnd(options.prefixWidth + 2);
  return `${prefix} ${text}`;
}

/**
 * Splits a byte stream into lines: feed chunks, get complete lines back; `flush` returns the
 * unterminated rest (if any) when the stream ends. `\r\n` counts as one line end.
 */
export class LineSplitter {
  #rest = '';

  push(chunk: string): string[] {
    const text = this.#rest + chunk;
    const parts = text.split('\n');
    this.#rest = parts.pop() ?? '';
    return parts.map((p) => (p.endsWith('\r') ? p.slice(0, -1) : p));
  }

  flush(): string[] {
    const rest = this.#rest;
    this.#rest = '';
    return rest === '' ? [] : [rest];
  }
}

function parseJsonObject(line: string): Record<string, unknown> | undefined {
  const trimmed = line.trim();
  if (!trimmed.startsWith('{') || !trimmed.endsWith('}')) return undefined;
  try {
    const value: unknown = JSON.parse(trimmed);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    const record = value as Record<string, unknown>;
    return 'msg' in record || 'level' in record ? record : undefined;
  } catch {
    return undefined;
  }
}

function levelName(level: unknown): string {
  if (typeof level === 'string') return level;
  if (typeof level === 'number') return PINO_LEVELS[level] ?? String(level);
  return 'info';
}

function describeError(value: unknown): string {
  if (typeof value !== 'object' || value === null) return short(value);
  const e = value as { message?: unknown; stack?: unknown; type?: unknown };
  const message = typeof e.message === 'string' ? e.message : short(value);
  const frame = typeof e.stack === 'string' ? e.stack.split('\n').find((l) => l.trim().startsWith('at ')) : undefined;
  return JSON.stringify(frame === undefined ? message : `${message} (${frame.trim()})`);
}

function short(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > MAX_FIELD_CHARS ? `${text.slice(0, MAX_FIELD_CHARS - 1)}…` : text;
}
