// Test support: a strict check of Prometheus text exposition format 0.0.4, for this tool's own
// tests (promtool is used as well where installed). Not used by the simulator itself.

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** One parsed sample line. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * Parses exposition text, returning its samples and every problem found: malformed lines, bad
 * names or label values, a sample before its family's TYPE, repeated HELP/TYPE or series, and
 * histograms without a `+Inf` bucket equal to `_count` or with decreasing buckets.
 */
export function checkExposition(text: string): { samples: Sample[]; problems: string[] } {
  const problems: string[] = [];
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const series = new Set<string>();
  if (text !== '' && !text.endsWith('\n')) problems.push('text does not end with a newline');
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  lines.forEach((line, i) => {
    const at = `line ${i + 1}`;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) return; // a plain comment
      const [, kind, name, rest = ''] = m;
      if (!NAME.test(name)) problems.push(`${at}: bad metric name ${name}`);
      if (kind === 'HELP') {
        if (helps.has(name)) problems.push(`${at}: second HELP for ${name}`);
        helps.add(name);
      } else {
        if (types.has(name)) problems.push(`${at}: second TYPE for ${name}`);
        if (!TYPES.has(rest)) problems.push(`${at}: bad type ${rest}`);
        if ([...series].some((s) => familyOf(s.split('{')[0], types) === name)) problems.push(`${at}: TYPE for ${name} after its samples`);
        types.set(name, rest);
      }
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (-?\d+))?$/.exec(line);
    if (!m) {
      problems.push(`${at}: malformed sample: ${line}`);
      return;
    }
    const [, name, labelText, valueText] = m;
    const labels = parseLabels(labelText ?? '', at, problems);
    const value = parseValue(valueText);
    if (value === undefined) problems.push(`${at}: bad value ${valueText}`);
    const family = familyOf(name, types);
    if (!types.has(family)) problems.push(`${at}: sample ${name} has no TYPE line before it`);
    const key = `${name}{${Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`).join(',')}}`;
    if (series.has(key)) problems.push(`${at}: duplicate series ${key}`);
    series.add(key);
    samples.push({ name, labels, value: value ?? NaN });
  });
  for (const [family, type] of types) if (type === 'histogram') checkHistogram(family, samples, problems);
  return { samples, problems };
}

function familyOf(name: string, types: Map<string, string>): string {
  for (const suffix of ['_bucket', '_count', '_sum']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      if (types.get(base) === 'histogram' || types.get(base) === 'summary') return base;
    }
  }
  return name;
}

function parseLabels(text: string, at: string, problems: string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  const re = /\s*([^=\s]+)\s*=\s*"((?:[^"\\\n]|\\["\\n])*)"\s*(,|$)/y;
  let pos = 0;
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m) {
      problems.push(`${at}: malformed labels {${text}}`);
      return labels;
    }
    const [, name, value] = m;
    if (!LABEL.test(name)) problems.push(`${at}: bad label name ${name}`);
    if (name in labels) problems.push(`${at}: label ${name} repeated`);
    labels[name] = value.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    pos = re.lastIndex;
  }
  return labels;
}

function parseValue(text: string): number | undefined {
  if (text === 'NaN') return NaN;
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return undefined;
  return Number(text);
}

function checkHistogram(family: string, samples: Sample[], problems: string[]): void {
  const groups = new Map<string, { buckets: [number, number][]; count?: number; sum?: number }>();
  const groupOf = (labels: Record<string, string>): { buckets: [number, number][]; count?: number; sum?: number } => {
    const key = Object.keys(labels).filter((k) => k !== 'le').sort().map((k) => `${k}=${labels[k]}`).join(',');
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { buckets: [] }));
    return g;
  };
  for (const s of samples) {
    if (s.name === `${family}_bucket`) groupOf(s.labels).buckets.push([s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value]);
    if (s.name === `${family}_count`) groupOf(s.labels).count = s.value;
    if (s.name === `${family}_sum`) groupOf(s.labels).sum = s.value;
  }
  for (const [key, g] of groups) {
    const inf = g.buckets.find(([le]) => le === Infinity);
    if (!inf) problems.push(`${family}{${key}}: no +Inf bucket`);
    else if (inf[1] !== g.count) problems.push(`${family}{${key}}: +Inf bucket ${inf[1]} differs from _count ${g.count}`);
    if (g.sum === undefined) problems.push(`${family}{${key}}: no _sum`);
    const sorted = [...g.buckets].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) if (sorted[i][1] < sorted[i - 1][1]) problems.push(`${family}{${key}}: bucket counts decrease at le=${sorted[i][0]}`);
  }
}

/** The value of the one sample named `name` whose labels include `labels`, or undefined. */
export function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.length === 1 ? found[0].value : undefined;
}
