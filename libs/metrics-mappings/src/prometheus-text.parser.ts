/** The metric types the Prometheus text format (0.0.4) declares with `# TYPE`. */
export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** One exposition line: its full name (`foo_bucket`, `foo_sum`, ...), labels, value and optional timestamp. */
export interface MetricSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** As written: may be NaN or ±Infinity. */
  readonly value: number;
  /** Milliseconds since the epoch, when the line carries one (may be negative). */
  readonly timestampMs?: number;
}

/**
 * A metric family: the `# TYPE`/`# HELP` name and every sample that belongs to it
 * (`_bucket`/`_sum`/`_count` lines join their histogram or summary). Always has samples.
 */
export interface MetricFamily {
  readonly name: string;
  readonly type: MetricType;
  /** Absent when the exposition gives no (non-empty) HELP line. */
  readonly help?: string;
  readonly samples: readonly MetricSample[];
}

/** Why an exposition was refused: the 1-based physical line and the reason. */
export class PrometheusParseError extends Error {
  constructor(
    readonly line: number,
    readonly reason: string,
  ) {
    super(`line ${line}: ${reason}`);
    this.name = 'PrometheusParseError';
  }
}

const TAB = 9;
const SPACE = 32;
const QUOTE = 34;
const HASH = 35;
const PLUS = 43;
const COMMA = 44;
const MINUS = 45;
const DOT = 46;
const EQUALS = 61;
const BACKSLASH = 92;
const LBRACE = 123;
const RBRACE = 125;

const TYPES: ReadonlySet<string> = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function isBlank(c: number): boolean {
  return c === SPACE || c === TAB;
}
function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}
function isLetterOrUnderscore(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95;
}
function isMetricNameStart(c: number): boolean {
  return isLetterOrUnderscore(c) || c === 58;
}
function isMetricNameChar(c: number): boolean {
  return isLetterOrUnderscore(c) || c === 58 || isDigit(c);
}
function isLabelNameChar(c: number): boolean {
  return isLetterOrUnderscore(c) || isDigit(c);
}

/**
 * A sample value: a decimal float (`1`, `-3e3`, `08`, `.5`, `1.`), or case-insensitive
 * `NaN`/`Inf`/`Infinity` with an optional sign (`-nan` as old llama.cpp builds print it).
 * Returns undefined for anything else (hex, `1_000`, empty, trailing junk).
 */
export function parseSampleValue(tok: string): number | undefined {
  const n = tok.length;
  if (n === 0) return undefined;
  let i = 0;
  const c0 = tok.charCodeAt(0);
  if (c0 === PLUS || c0 === MINUS) i = 1;
  if (i < n && !isDigit(tok.charCodeAt(i)) && tok.charCodeAt(i) !== DOT) {
    const word = tok.slice(i).toLowerCase();
    if (word === 'nan') return NaN;
    if (word === 'inf' || word === 'infinity') return c0 === MINUS ? -Infinity : Infinity;
    return undefined;
  }
  let digits = 0;
  while (i < n && isDigit(tok.charCodeAt(i))) {
    i++;
    digits++;
  }
  if (i < n && tok.charCodeAt(i) === DOT) {
    i++;
    while (i < n && isDigit(tok.charCodeAt(i))) {
      i++;
      digits++;
    }
  }
  if (digits === 0) return undefined;
  if (i < n && (tok.charCodeAt(i) | 32) === 101 /* e or E */) {
    i++;
    if (i < n && (tok.charCodeAt(i) === PLUS || tok.charCodeAt(i) === MINUS)) i++;
    const start = i;
    while (i < n && isDigit(tok.charCodeAt(i))) i++;
    if (i === start) return undefined;
  }
  return i === n ? Number(tok) : undefined;
}

/** A timestamp: an optionally signed decimal integer (milliseconds). */
function parseTimestamp(tok: string): number | undefined {
  const n = tok.length;
  let i = 0;
  const c0 = tok.charCodeAt(0);
  if (c0 === PLUS || c0 === MINUS) i = 1;
  if (i === n) return undefined;
  for (; i < n; i++) if (!isDigit(tok.charCodeAt(i))) return undefined;
  const v = Number(tok);
  return Number.isFinite(v) ? v : undefined;
}

interface FamilyBuilder {
  name: string;
  type: MetricType;
  typeSet: boolean;
  help?: string;
  samples: MetricSample[];
}

/** Sets `labels[name]` as an own property, even for `__proto__`. */
function setLabel(labels: Record<string, string>, name: string, value: string): void {
  if (name === '__proto__') Object.defineProperty(labels, name, { value, enumerable: true, writable: true, configurable: true });
  else labels[name] = value;
}

/**
 * Parses a Prometheus text exposition (format 0.0.4) into metric families in order of first
 * appearance. Pure and allocation-light: one pass over the string, no regular expressions.
 *
 * Strict like prometheus/common's reference parser: every line ends in a line feed (a body
 * cut short by a dropped connection is refused, not half-read), label values know only the
 * escapes `\\`, `\"` and `\n`, a family has at most one HELP and one TYPE and no TYPE after
 * its samples, histogram `le` and summary `quantile` labels must be numbers. Lenient where the
 * Prometheus server is: labels may be separated by blanks without a comma, HELP keeps an
 * unknown escape as written, blank lines and leading blanks are fine.
 *
 * Not accepted: OpenMetrics (its `# EOF` marker is refused with a reason — its timestamps are
 * seconds, not milliseconds; ask for `text/plain; version=0.0.4`), and the UTF-8 quoted-name
 * syntax (`{"my.metric"}`). Throws {@link PrometheusParseError} naming the line.
 */
export function parsePrometheusText(text: string): MetricFamily[] {
  const families = new Map<string, FamilyBuilder>();
  const len = text.length;
  let pos = 0;
  let lineNo = 0;
  let lastName = '';
  let lastFamily: FamilyBuilder | undefined;
  let unterminatedLine = 0; // line number of a last line without line feed, when it is not blank

  const fail = (reason: string): never => {
    throw new PrometheusParseError(lineNo, reason);
  };

  /** The family a sample or comment name belongs to, created untyped if new (expfmt's rule). */
  const familyFor = (name: string): FamilyBuilder => {
    const exact = families.get(name);
    if (exact !== undefined) return exact;
    const n = name.length;
    let base: FamilyBuilder | undefined;
    if (n > 4 && name.endsWith('_sum')) base = families.get(name.slice(0, n - 4));
    else if (n > 6 && name.endsWith('_count')) base = families.get(name.slice(0, n - 6));
    if (base !== undefined && (base.type === 'summary' || base.type === 'histogram')) return base;
    if (n > 7 && name.endsWith('_bucket')) {
      base = families.get(name.slice(0, n - 7));
      if (base !== undefined && base.type === 'histogram') return base;
    }
    const created: FamilyBuilder = { name, type: 'untyped', typeSet: false, samples: [] };
    families.set(name, created);
    return created;
  };

  while (pos < len) {
    lineNo++;
    let end = text.indexOf('\n', pos);
    if (end < 0) {
      // The last line has no line feed: read it (so a bad line gets its own reason), then refuse.
      end = len;
      unterminatedLine = lineNo;
    }
    let i = pos;
    while (i < end && isBlank(text.charCodeAt(i))) i++;
    const lineEnd = end;
    pos = end + 1;
    if (i === lineEnd) {
      unterminatedLine = 0; // trailing blanks without a line feed are harmless
      continue; // blank line
    }
    const c = text.charCodeAt(i);

    if (c === HASH) {
      // Comment, HELP or TYPE.
      i++;
      while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
      let k = i;
      while (k < lineEnd && !isBlank(text.charCodeAt(k))) k++;
      const keyword = text.slice(i, k);
      if (keyword !== 'HELP' && keyword !== 'TYPE') {
        if (keyword === 'EOF' && text.slice(k, lineEnd).trim() === '') fail(openMetricsReason());
        continue; // plain comment
      }
      i = k;
      while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
      if (i === lineEnd) continue; // `# HELP` with nothing after it: ignored, as the reference does
      const nameStart = i;
      if (!isMetricNameStart(text.charCodeAt(i))) fail(`invalid metric name in ${keyword} line`);
      while (i < lineEnd && isMetricNameChar(text.charCodeAt(i))) i++;
      if (i < lineEnd && !isBlank(text.charCodeAt(i))) fail(`invalid metric name in ${keyword} line`);
      const name = text.slice(nameStart, i);
      if (i === lineEnd) continue; // name only: ignored
      const family = familyFor(name);
      lastFamily = undefined; // a TYPE line may change which family a name resolves to
      while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
      if (i === lineEnd) continue; // name and blanks only: ignored
      if (keyword === 'HELP') {
        if (family.help !== undefined) fail(`second HELP line for metric name '${family.name}'`);
        family.help = unescapeHelp(text, i, lineEnd);
      } else {
        if (family.typeSet) fail(`second TYPE line for metric name '${family.name}'`);
        if (family.samples.length > 0) fail(`TYPE line for metric name '${family.name}' after its samples`);
        let typeEnd = lineEnd;
        while (typeEnd > i && isBlank(text.charCodeAt(typeEnd - 1))) typeEnd--;
        const type = text.slice(i, typeEnd).toLowerCase();
        if (!TYPES.has(type)) fail(`unknown metric type '${text.slice(i, typeEnd)}' for '${family.name}'`);
        family.type = type as MetricType;
        family.typeSet = true;
      }
      continue;
    }

    // A sample: name [{labels}] value [timestamp]
    if (!isMetricNameStart(c)) {
      if (c === LBRACE) fail('expected a metric name, found "{" (quoted UTF-8 metric names are not supported)');
      fail(`invalid metric name starting with '${text[i]}'`);
    }
    const nameStart = i;
    while (i < lineEnd && isMetricNameChar(text.charCodeAt(i))) i++;
    // Consecutive samples usually share a name: reuse it and its family without a lookup.
    let name: string;
    let family: FamilyBuilder;
    if (lastFamily !== undefined && i - nameStart === lastName.length && text.startsWith(lastName, nameStart)) {
      name = lastName;
      family = lastFamily;
    } else {
      name = text.slice(nameStart, i);
      family = familyFor(name);
      lastName = name;
      lastFamily = family;
    }
    while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
    const labels: Record<string, string> = {};
    let le: string | undefined;
    let quantile: string | undefined;
    if (i < lineEnd && text.charCodeAt(i) === LBRACE) {
      i++;
      for (;;) {
        while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
        if (i === lineEnd) fail(`unexpected end of line in the labels of '${name}'`);
        if (text.charCodeAt(i) === RBRACE) {
          i++;
          break;
        }
        const ln0 = i;
        if (!isLetterOrUnderscore(text.charCodeAt(i))) fail(`invalid label name starting with '${text[i]}' in '${name}'`);
        while (i < lineEnd && isLabelNameChar(text.charCodeAt(i))) i++;
        const labelName = text.slice(ln0, i);
        if (labelName === '__name__') fail(`label name '__name__' is reserved (in '${name}')`);
        while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
        if (i === lineEnd || text.charCodeAt(i) !== EQUALS) fail(`expected '=' after label name '${labelName}' in '${name}'`);
        i++;
        while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
        if (i === lineEnd || text.charCodeAt(i) !== QUOTE) fail(`expected '"' to open the value of label '${labelName}' in '${name}'`);
        i++;
        // Label value: fast path when it holds no backslash (scan stays within the line).
        let close = i;
        while (close < lineEnd) {
          const ch = text.charCodeAt(close);
          if (ch === QUOTE || ch === BACKSLASH) break;
          close++;
        }
        let value: string;
        if (close < lineEnd && text.charCodeAt(close) === QUOTE) {
          value = text.slice(i, close);
          i = close + 1;
        } else {
          let out = '';
          let from = i;
          for (;;) {
            if (i >= lineEnd) fail(`unterminated value of label '${labelName}' in '${name}'`);
            const ch = text.charCodeAt(i);
            if (ch === QUOTE) break;
            if (ch === BACKSLASH) {
              out += text.slice(from, i);
              const esc = i + 1 < lineEnd ? text.charCodeAt(i + 1) : -1;
              if (esc === BACKSLASH) out += '\\';
              else if (esc === QUOTE) out += '"';
              else if (esc === 110 /* n */) out += '\n';
              else fail(`invalid escape sequence '\\${esc < 0 ? '' : text[i + 1]}' in the value of label '${labelName}'`);
              i += 2;
              from = i;
            } else i++;
          }
          value = out + text.slice(from, i);
          i++; // closing quote
        }
        if (Object.prototype.hasOwnProperty.call(labels, labelName)) fail(`duplicate label name '${labelName}' in '${name}'`);
        setLabel(labels, labelName, value);
        if (labelName === 'le') le = value;
        else if (labelName === 'quantile') quantile = value;
        while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
        if (i === lineEnd) fail(`unexpected end of line in the labels of '${name}'`);
        const sep = text.charCodeAt(i);
        if (sep === COMMA) i++;
        else if (sep !== RBRACE && !isLetterOrUnderscore(sep)) fail(`expected ',' or '}' after the value of label '${labelName}' in '${name}', found '${text[i]}'`);
      }
      while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
    }
    if (i === lineEnd) fail(`missing value for '${name}'`);
    let k = i;
    while (k < lineEnd && !isBlank(text.charCodeAt(k))) k++;
    const valueTok = text.slice(i, k);
    const value = parseSampleValue(valueTok);
    if (value === undefined) fail(`invalid value '${valueTok}' for '${name}'`);
    i = k;
    while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
    let timestampMs: number | undefined;
    if (i < lineEnd) {
      k = i;
      while (k < lineEnd && !isBlank(text.charCodeAt(k))) k++;
      const tsTok = text.slice(i, k);
      timestampMs = parseTimestamp(tsTok);
      if (timestampMs === undefined) fail(`invalid timestamp '${tsTok}' for '${name}' (want integer milliseconds)`);
      i = k;
      while (i < lineEnd && isBlank(text.charCodeAt(i))) i++;
      if (i < lineEnd) fail(`unexpected text after the timestamp of '${name}'`);
    }
    if (family.type === 'histogram' && name.length === family.name.length + 7 && le !== undefined) {
      if (parseSampleValue(le) === undefined) fail(`histogram bucket of '${family.name}' has a non-numeric le="${le}"`);
    } else if (family.type === 'summary' && name === family.name && quantile !== undefined) {
      if (parseSampleValue(quantile) === undefined) fail(`summary '${family.name}' has a non-numeric quantile="${quantile}"`);
    }
    family.samples.push(timestampMs === undefined ? { name, labels, value: value as number } : { name, labels, value: value as number, timestampMs });
  }

  if (unterminatedLine > 0) {
    lineNo = unterminatedLine;
    fail('unexpected end of input: the last line has no line feed (truncated exposition?)');
  }

  const out: MetricFamily[] = [];
  for (const f of families.values()) {
    if (f.samples.length === 0) continue; // HELP/TYPE without samples: no family, as the reference does
    out.push(f.help === undefined ? { name: f.name, type: f.type, samples: f.samples } : { name: f.name, type: f.type, help: f.help, samples: f.samples });
  }
  return out;
}

function openMetricsReason(): string {
  return "OpenMetrics exposition ('# EOF') is not supported; request text/plain; version=0.0.4";
}

/** HELP text from `start` to `end`: `\\` → `\`, `\n` → line feed, any other backslash kept. */
function unescapeHelp(text: string, start: number, end: number): string {
  let bs = start;
  while (bs < end && text.charCodeAt(bs) !== BACKSLASH) bs++;
  if (bs === end) return text.slice(start, end);
  let out = '';
  let from = start;
  for (let i = bs; i < end; i++) {
    if (text.charCodeAt(i) !== BACKSLASH || i + 1 >= end) continue;
    const esc = text.charCodeAt(i + 1);
    if (esc === BACKSLASH || esc === 110) {
      out += text.slice(from, i) + (esc === BACKSLASH ? '\\' : '\n');
      i++;
      from = i + 1;
    }
  }
  return out + text.slice(from, end);
}

/** Escapes a label value for the text format (`\`, `"`, line feed). */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\\' ? '\\\\' : c === '"' ? '\\"' : '\\n'));
}

/** Escapes HELP text for the text format (`\`, line feed). */
export function escapeHelp(help: string): string {
  return help.replace(/[\\\n]/g, (c) => (c === '\\' ? '\\\\' : '\\n'));
}

/** Formats a sample value so {@link parseSampleValue} reads it back exactly. */
export function formatSampleValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return Object.is(v, -0) ? '-0' : String(v);
}

/**
 * Renders families as a text exposition (0.0.4) that {@link parsePrometheusText} reads back to
 * the same families. Used by tests, the engine simulator and tools; not tuned for speed.
 */
export function renderPrometheusText(families: readonly MetricFamily[]): string {
  let out = '';
  for (const f of families) {
    if (f.help !== undefined) out += `# HELP ${f.name} ${escapeHelp(f.help)}\n`;
    out += `# TYPE ${f.name} ${f.type}\n`;
    for (const s of f.samples) {
      const names = Object.keys(s.labels);
      out += s.name;
      if (names.length > 0) out += `{${names.map((n) => `${n}="${escapeLabelValue(s.labels[n])}"`).join(',')}}`;
      out += ` ${formatSampleValue(s.value)}`;
      if (s.timestampMs !== undefined) out += ` ${s.timestampMs}`;
      out += '\n';
    }
  }
  return out;
}
