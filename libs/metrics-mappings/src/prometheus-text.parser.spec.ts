import { readdirSync, readFileSync } from 'node:fs';
import { fixturesDir } from '@llmgw/testing';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  PrometheusParseError,
  parsePrometheusText,
  parseSampleValue,
  renderPrometheusText,
  type MetricFamily,
  type MetricSample,
  type MetricType,
} from './prometheus-text.parser';

// Copies of ../shared/fixtures (provenance line kept), committed so tests run on a clean clone.
const FIXTURES = fixturesDir();
const read = (rel: string): string => readFileSync(join(FIXTURES, rel), 'utf8');

function errorOf(text: string): PrometheusParseError {
  try {
    parsePrometheusText(text);
  } catch (e) {
    if (e instanceof PrometheusParseError) return e;
    throw e;
  }
  throw new Error('expected a PrometheusParseError, parsing succeeded');
}

function family(fams: readonly MetricFamily[], name: string): MetricFamily {
  const f = fams.find((x) => x.name === name);
  if (f === undefined) throw new Error(`no family ${name} in [${fams.map((x) => x.name).join(', ')}]`);
  return f;
}

type Expectation =
  | { accept: true; families: number; samples: number }
  | { accept: false; line: number; reason: string };

/** Every file in __fixtures__ must be named here (the test below fails on a file without an entry). */
const EXPECTED: Record<string, Expectation> = {
  'llamacpp/llama_server_metrics_excerpt.prom': { accept: true, families: 4, samples: 4 },
  'prometheus/prom_common_valid_parse_1.prom': { accept: true, families: 3, samples: 3 },
  'prometheus/prom_common_valid_parse_2.prom': { accept: true, families: 2, samples: 4 },
  'prometheus/prom_common_valid_parse_3.prom': { accept: true, families: 4, samples: 12 },
  'prometheus/prom_common_valid_parse_4.prom': { accept: true, families: 1, samples: 7 },
  'prometheus/prom_common_testdata_text.prom': { accept: true, families: 37, samples: 248 },
  'prometheus/prometheus_textparse_TestPromParse_input.prom': { accept: true, families: 10, samples: 26 },
  'prometheus/prom_common_invalid_parse_error_0.prom': { accept: false, line: 2, reason: 'the last line has no line feed' },
  'prometheus/prom_common_invalid_parse_error_1.prom': { accept: false, line: 2, reason: "invalid escape sequence '\\t'" },
  'prometheus/prom_common_invalid_parse_error_2.prom': { accept: false, line: 3, reason: "unterminated value of label 'label'" },
  'prometheus/prom_common_invalid_parse_error_3.prom': { accept: false, line: 2, reason: "invalid label name starting with '@'" },
  'prometheus/prom_common_invalid_parse_error_4.prom': { accept: false, line: 2, reason: "label name '__name__' is reserved" },
  'prometheus/prom_common_invalid_parse_error_5.prom': { accept: false, line: 2, reason: "expected '=' after label name 'label'" },
  'prometheus/prom_common_invalid_parse_error_6.prom': { accept: false, line: 2, reason: `expected '"' to open the value of label 'label'` },
  'prometheus/prom_common_invalid_parse_error_7.prom': { accept: false, line: 4, reason: 'non-numeric quantile="bla"' },
  'prometheus/prom_common_invalid_parse_error_8.prom': { accept: false, line: 2, reason: "expected ',' or '}' after the value of label 'label'" },
  'prometheus/prom_common_invalid_parse_error_9.prom': { accept: false, line: 2, reason: "invalid timestamp '2.72'" },
  'prometheus/prom_common_invalid_parse_error_10.prom': { accept: false, line: 2, reason: 'unexpected text after the timestamp' },
  'prometheus/prom_common_invalid_parse_error_11.prom': { accept: false, line: 2, reason: "invalid value 'blubb'" },
  'prometheus/prom_common_invalid_parse_error_12.prom': { accept: false, line: 4, reason: "second HELP line for metric name 'metric'" },
  'prometheus/prom_common_invalid_parse_error_13.prom': { accept: false, line: 4, reason: "second TYPE line for metric name 'metric'" },
  'prometheus/prom_common_invalid_parse_error_14.prom': { accept: false, line: 4, reason: "TYPE line for metric name 'metric' after its samples" },
  'prometheus/prom_common_invalid_parse_error_15.prom': { accept: false, line: 3, reason: "unknown metric type 'bla'" },
  'prometheus/prom_common_invalid_parse_error_16.prom': { accept: false, line: 3, reason: 'invalid metric name in TYPE line' },
  'prometheus/prom_common_invalid_parse_error_17.prom': { accept: false, line: 2, reason: "invalid metric name starting with '@'" },
  'prometheus/prom_common_invalid_parse_error_18.prom': { accept: false, line: 2, reason: 'expected a metric name, found "{"' },
  'prometheus/prom_common_invalid_parse_error_19.prom': { accept: false, line: 4, reason: 'non-numeric le="bla"' },
  // Decision: strict. The docs example's UTF-8 quoted-name line has no value; it is refused, not skipped.
  'prometheus/prometheus_docs_text_format_example.prom': { accept: false, line: 11, reason: 'quoted UTF-8 metric names are not supported' },
  // Decision: OpenMetrics is not accepted (seconds timestamps, # EOF); the scraper asks for text 0.0.4.
  'prometheus/openmetrics_1histogram.om.txt': { accept: false, line: 46, reason: 'OpenMetrics exposition' },
  // The vLLM docs sample keeps the doc's `$ curl` and `...` lines, which are not exposition lines.
  'vllm/vllm_docs_design_metrics_example_output.prom': { accept: false, line: 2, reason: "invalid metric name starting with '$'" },
};

/** Every metrics exposition among the shared fixtures (the engines' and Prometheus's own). */
const fixtureFiles = ['llamacpp', 'prometheus', 'vllm']
  .flatMap((dir) => readdirSync(join(FIXTURES, dir)).map((f) => `${dir}/${f}`))
  .filter((f) => f.endsWith('.prom') || f.endsWith('.om.txt'))
  .sort();

describe('parsePrometheusText on every fixture file', () => {
  it('has an expectation for every fixture file and a file for every expectation', () => {
    expect(fixtureFiles).toEqual(Object.keys(EXPECTED).sort());
  });

  it.each(fixtureFiles)('%s', (file) => {
    const want = EXPECTED[file];
    expect(want, `no expectation for ${file}`).toBeDefined();
    if (want.accept) {
      const fams = parsePrometheusText(read(file));
      expect(fams).toHaveLength(want.families);
      expect(fams.reduce((n, f) => n + f.samples.length, 0)).toBe(want.samples);
    } else {
      const err = errorOf(read(file));
      expect(err.line).toBe(want.line);
      expect(err.reason).toContain(want.reason);
      expect(err.message).toBe(`line ${want.line}: ${err.reason}`);
    }
  });
});

describe('parsePrometheusText values from the real inputs', () => {
  it('valid_1: minimal lines, negative exponent with timestamp, empty braces; HELP without samples makes no family', () => {
    const fams = parsePrometheusText(read('prometheus/prom_common_valid_parse_1.prom'));
    expect(fams).toEqual([
      { name: 'minimal_metric', type: 'untyped', samples: [{ name: 'minimal_metric', labels: {}, value: 1.234 }] },
      { name: 'another_metric', type: 'untyped', samples: [{ name: 'another_metric', labels: {}, value: -3000, timestampMs: 103948 }] },
      { name: 'no_labels', type: 'untyped', samples: [{ name: 'no_labels', labels: {}, value: 3 }] },
    ]);
  });

  it('valid_2: label-value and HELP escapes, NaN, ±Inf, tabs, blanks around =, trailing comma, value glued to }', () => {
    const fams = parsePrometheusText(read('prometheus/prom_common_valid_parse_2.prom'));
    expect(fams).toEqual([
      {
        name: 'name',
        type: 'counter',
        help: 'two-line\n doc  str\\ing',
        samples: [
          { name: 'name', labels: { labelname: 'val1', basename: 'basevalue' }, value: NaN },
          { name: 'name', labels: { labelname: 'val2', basename: 'base"v\\al\nue' }, value: 0.23, timestampMs: 1234567890 },
        ],
      },
      {
        name: 'name2',
        type: 'gauge',
        help: 'doc str"ing 2',
        samples: [
          { name: 'name2', labels: { labelname: 'val2', basename: 'basevalue2' }, value: Infinity, timestampMs: 54321 },
          { name: 'name2', labels: { labelname: 'val1' }, value: -Infinity },
        ],
      },
    ]);
  });

  it('valid_3: summaries gather _sum/_count across the file; decoys stay their own families', () => {
    const fams = parsePrometheusText(read('prometheus/prom_common_valid_parse_3.prom'));
    expect(fams.map((f) => [f.name, f.type, f.samples.length])).toEqual([
      ['my_summary', 'summary', 8],
      ['decoy', 'untyped', 1],
      ['fake_sum', 'untyped', 1],
      ['another_summary', 'summary', 2],
    ]);
    const my = family(fams, 'my_summary');
    expect(my.help).toBeUndefined(); // `# HELP my_summary` and `# HELP my_summary ` carry no text
    expect(my.samples).toContainEqual({ name: 'my_summary_sum', labels: { n1: 'val2' }, value: 8, timestampMs: 15 });
    expect(my.samples).toContainEqual({ name: 'my_summary_count', labels: { n2: 'val2', n1: 'val1' }, value: 5, timestampMs: 5 });
    expect(my.samples).toContainEqual({ name: 'my_summary', labels: { n1: 'val1', n2: 'val2', quantile: '-12.34' }, value: NaN });
    expect(family(fams, 'decoy').samples).toEqual([{ name: 'decoy', labels: {}, value: -1, timestampMs: -2 }]);
  });

  it('valid_4: a histogram with its buckets, +Inf bucket, sum and count', () => {
    const [h] = parsePrometheusText(read('prometheus/prom_common_valid_parse_4.prom'));
    expect(h.name).toBe('request_duration_microseconds');
    expect(h.type).toBe('histogram');
    expect(h.help).toBe('The response latency.');
    expect(h.samples.map((s) => [s.name, s.labels.le, s.value])).toEqual([
      ['request_duration_microseconds_bucket', '100', 123],
      ['request_duration_microseconds_bucket', '120', 412],
      ['request_duration_microseconds_bucket', '144', 592],
      ['request_duration_microseconds_bucket', '172.8', 1524],
      ['request_duration_microseconds_bucket', '+Inf', 2693],
      ['request_duration_microseconds_sum', undefined, 1756047.3],
      ['request_duration_microseconds_count', undefined, 2693],
    ]);
  });

  it('a whole real Prometheus server scrape', () => {
    const fams = parsePrometheusText(read('prometheus/prom_common_testdata_text.prom'));
    expect(family(fams, 'process_resident_memory_bytes')).toEqual({
      name: 'process_resident_memory_bytes',
      type: 'gauge',
      help: 'Resident memory size in bytes.',
      samples: [{ name: 'process_resident_memory_bytes', labels: {}, value: 53870592 }],
    });
    const lat = family(fams, 'http_request_duration_microseconds');
    expect(lat.type).toBe('summary');
    expect(lat.samples).toHaveLength(55); // 11 handlers × (3 quantiles + sum + count)
    expect(lat.samples).toContainEqual({ name: 'http_request_duration_microseconds_sum', labels: { handler: 'prometheus' }, value: 179886.5000000001 });
  });

  it("Prometheus' own tricky input: blank-separated labels, tab separators, comments that look like keywords", () => {
    const fams = parsePrometheusText(read('prometheus/prometheus_textparse_TestPromParse_input.prom'));
    const gc = family(fams, 'go_gc_duration_seconds');
    expect(gc.type).toBe('summary'); // from `# <TAB>TYPE`
    expect(gc.help).toBe('A summary of the GC invocation durations.');
    expect(gc.samples).toHaveLength(11);
    expect(gc.samples).toContainEqual({ name: 'go_gc_duration_seconds', labels: { quantile: '2.0', a: 'b' }, value: 8.3835e-5 });
    expect(gc.samples).toContainEqual({ name: 'go_gc_duration_seconds_count', labels: {}, value: 99 });
    expect(family(fams, 'some:aggregate:rate5m').samples).toEqual([{ name: 'some:aggregate:rate5m', labels: { a_b: 'c' }, value: 1 }]);
    expect(family(fams, 'go_goroutines').samples).toEqual([{ name: 'go_goroutines', labels: {}, value: 33, timestampMs: 123123 }]);
    expect(family(fams, 'some_counter_total')).toMatchObject({ type: 'counter', help: 'Help after type.' });
    expect(family(fams, 'testmetric').samples.map((s) => s.labels)).toEqual([{ _label_starting_with_underscore: 'foo' }, { label: '"bar"' }, { le: '10' }]);
    expect(fams.map((f) => f.name)).not.toContain('nohelp1');
  });

  it('the docs example reads once its value-less UTF-8 name line is removed', () => {
    const lines = read('prometheus/prometheus_docs_text_format_example.prom').split('\n');
    expect(lines[10]).toBe('{"my.dotted.metric", "error.message"="Not Found"}');
    const fams = parsePrometheusText(lines.filter((_, i) => i !== 10).join('\n'));
    expect(family(fams, 'http_requests_total').samples[1]).toEqual({
      name: 'http_requests_total',
      labels: { method: 'post', code: '400' },
      value: 3,
      timestampMs: 1395066363000,
    });
    expect(family(fams, 'msdos_file_access_time_seconds').samples[0]).toEqual({
      name: 'msdos_file_access_time_seconds',
      labels: { path: 'C:\\DIR\\FILE.TXT', error: 'Cannot find file:\n"FILE.TXT"' },
      value: 1.458255915e9,
    });
    expect(family(fams, 'something_weird').samples[0]).toEqual({
      name: 'something_weird',
      labels: { problem: 'division by zero' },
      value: Infinity,
      timestampMs: -3982045,
    });
    expect(family(fams, 'http_request_duration_seconds').samples).toHaveLength(8);
    expect(family(fams, 'rpc_duration_seconds')).toMatchObject({ type: 'summary', help: 'A summary of the RPC duration in seconds.' });
  });

  it('the OpenMetrics sample is refused by its # EOF, not by a confusing later error', () => {
    const text = read('prometheus/openmetrics_1histogram.om.txt');
    expect(errorOf(text + '\n').reason).toContain('OpenMetrics');
  });

  it('the vLLM docs sample reads once the doc-only lines are removed', () => {
    const text = read('vllm/vllm_docs_design_metrics_example_output.prom')
      .split('\n')
      .filter((l) => l !== '...' && !l.startsWith('$ curl'))
      .join('\n');
    const fams = parsePrometheusText(text);
    expect(family(fams, 'vllm:num_requests_running').samples).toEqual([
      { name: 'vllm:num_requests_running', labels: { model_name: 'meta-llama/Llama-3.1-8B-Instruct' }, value: 8 },
    ]);
    expect(family(fams, 'vllm:time_to_first_token_seconds')).toMatchObject({ type: 'histogram' });
    expect(family(fams, 'vllm:time_to_first_token_seconds').samples).toHaveLength(9); // the doc drops +Inf and _sum
  });

  it('the llama.cpp excerpt: colon names, counters, help', () => {
    const fams = parsePrometheusText(read('llamacpp/llama_server_metrics_excerpt.prom'));
    expect(family(fams, 'llamacpp:prompt_seconds_total')).toEqual({
      name: 'llamacpp:prompt_seconds_total',
      type: 'counter',
      help: 'Prompt process time',
      samples: [{ name: 'llamacpp:prompt_seconds_total', labels: {}, value: 8.168 }],
    });
  });
});

describe('parsePrometheusText edge cases', () => {
  it.each([
    ['NaN', NaN],
    ['nan', NaN],
    ['-nan', NaN], // old llama.cpp builds
    ['+Inf', Infinity],
    ['Inf', Infinity],
    ['-inf', -Infinity],
    ['+Infinity', Infinity],
    ['08', 8],
    ['.5', 0.5],
    ['1.', 1],
    ['-3e3', -3000],
    ['1E+2', 100],
    ['-0', -0],
  ])('value %s reads as %s', (tok, want) => {
    expect(parseSampleValue(tok)).toBe(want);
    expect(parsePrometheusText(`m ${tok}\n`)[0].samples[0].value).toBe(want);
  });

  it.each(['', '0x10', '1_000', 'Nan1', '--1', '1e', '.', 'e5', 'infinit', '1.2.3', '+'])('value %j is refused', (tok) => {
    expect(parseSampleValue(tok)).toBeUndefined();
  });

  it('empty input and comment-only input give no families', () => {
    expect(parsePrometheusText('')).toEqual([]);
    expect(parsePrometheusText('# just a comment\n\n# TYPE lonely gauge\n')).toEqual([]);
  });

  it('trailing blanks after the last line feed are fine; a last line without one is refused', () => {
    expect(parsePrometheusText('m 1\n  \t')).toHaveLength(1);
    expect(errorOf('m 1\n# a comment').line).toBe(2);
    expect(errorOf('m 1\nm 2').reason).toContain('no line feed');
  });

  it('refuses duplicate label names and an # EOF marker in the middle', () => {
    expect(errorOf('m{a="1",a="2"} 1\n').reason).toContain("duplicate label name 'a'");
    expect(errorOf('m 1\n# EOF\nn 2\n')).toMatchObject({ line: 2 });
  });

  it('a label named __proto__ is an own label, not a prototype', () => {
    const [f] = parsePrometheusText('m{__proto__="x",constructor="y"} 1\n');
    const labels = f.samples[0].labels;
    expect(Object.keys(labels)).toEqual(['__proto__', 'constructor']);
    expect(labels['__proto__']).toBe('x');
    expect(Object.getPrototypeOf(labels)).toBe(Object.prototype);
  });

  it('errors are PrometheusParseError instances with line and reason', () => {
    const err = errorOf('ok 1\n\nbad{x=1} 2\n');
    expect(err).toBeInstanceOf(PrometheusParseError);
    expect(err.name).toBe('PrometheusParseError');
    expect(err.line).toBe(3);
  });
});

// ---- property: render → parse gives the same families ----

const SUFFIXES = ['_sum', '_count', '_bucket'];
const metricName = fc
  .stringMatching(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,12}$/)
  .filter((n) => !SUFFIXES.some((s) => n.endsWith(s)));
const labelName = fc.oneof(
  fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,8}$/).filter((n) => n !== '__name__' && n !== 'le' && n !== 'quantile'),
  fc.constantFrom('__proto__', 'constructor', 'model_name', 'engine'),
);
const labelValue = fc.oneof(
  fc.string({ unit: fc.constantFrom('\\', '"', '\n', 'a', ' ', '{', '}', ',', '=', '#', '\t', 'é') }),
  fc.string({ unit: 'binary' }),
);
const help = fc
  .oneof(fc.string({ unit: fc.constantFrom('\\', 'n', '\n', 'x', ' ', '"', '#') }), fc.string({ unit: 'binary' }))
  .filter((h) => h.length > 0 && h[0] !== ' ' && h[0] !== '\t');
const timestamp = fc.option(fc.maxSafeInteger(), { nil: undefined });

function makeLabels(pairs: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [k, v] of pairs) Object.defineProperty(labels, k, { value: v, enumerable: true, writable: true, configurable: true });
  return labels;
}
const labelsArb = fc.uniqueArray(fc.tuple(labelName, labelValue), { selector: (t) => t[0], maxLength: 4 });

function sample(name: string, labels: Record<string, string>, value: number, ts: number | undefined): MetricSample {
  return ts === undefined ? { name, labels, value } : { name, labels, value, timestampMs: ts };
}

const simpleSamples = (name: string) =>
  fc.array(
    fc.tuple(labelsArb, fc.double(), timestamp).map(([l, v, ts]) => sample(name, makeLabels(l), v, ts)),
    { minLength: 1, maxLength: 4 },
  );
const histSamples = (name: string, type: MetricType) =>
  fc.array(
    fc.tuple(fc.constantFrom('', '_sum', '_count'), labelsArb, fc.double(), fc.double(), timestamp).map(([suffix, l, bound, v, ts]) => {
      const key = type === 'histogram' ? 'le' : 'quantile';
      const sampleName = suffix === '' ? (type === 'histogram' ? `${name}_bucket` : name) : `${name}${suffix}`;
      const pairs: Array<readonly [string, string]> = suffix === '' ? [...l, [key, bound === Infinity ? '+Inf' : String(bound)]] : [...l];
      return sample(sampleName, makeLabels(pairs), v, ts);
    }),
    { minLength: 1, maxLength: 5 },
  );

const familyArb = fc
  .tuple(metricName, fc.constantFrom<MetricType>('counter', 'gauge', 'untyped', 'histogram', 'summary'), fc.option(help, { nil: undefined }))
  .chain(([name, type, h]) =>
    (type === 'histogram' || type === 'summary' ? histSamples(name, type) : simpleSamples(name)).map(
      (samples): MetricFamily => (h === undefined ? { name, type, samples } : { name, type, help: h, samples }),
    ),
  );

describe('parsePrometheusText property', () => {
  it('parse(render(families)) returns the same families, values and escaped label values included', () => {
    fc.assert(
      fc.property(fc.uniqueArray(familyArb, { selector: (f) => f.name, maxLength: 6 }), (fams) => {
        expect(parsePrometheusText(renderPrometheusText(fams))).toEqual(fams);
      }),
      { numRuns: 300 },
    );
  });
});
