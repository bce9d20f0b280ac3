import { describe, expect, it } from 'vitest';
import { NVIDIA_SMI_QUERY_ARGS, parseNvidiaSmiCsv } from './nvidia-smi.parser';
import { FIXTURE_FILES, H100_CAPTURE, P100_CSV, asAgentQueryRow, h100QueryCsv, readFixture, withoutProvenance } from './test/nvidia-smi.fixtures';

const MIB = 1024 * 1024;
const H100_UUID = 'GPU-00000000-0000-0000-0000-000000000000';

/** Every `--query-gpu` CSV block found in a fixture file (header line + rows). */
function queryCsvBlocks(file: string): string[] {
  if (file === H100_CAPTURE) return [h100QueryCsv('idle'), h100QueryCsv('load')];
  return [withoutProvenance(readFixture(file))];
}

describe('parseNvidiaSmiCsv on the real fixtures', () => {
  it.each(FIXTURE_FILES.flatMap((f) => queryCsvBlocks(f).map((csv, i) => [f, i, csv] as const)))(
    '%s block %i parses every GPU without problems',
    (_file, _i, csv) => {
      const { gpus, problems } = parseNvidiaSmiCsv(csv);
      expect(problems).toEqual([]);
      expect(gpus).toHaveLength(1);
      expect(gpus[0].uuid).toMatch(/^GPU-[0-9a-f-]{36}$/);
      expect(gpus[0].memoryTotalBytes).toBeGreaterThan(0);
    },
  );

  it('reads the H100 capture under load exactly (header with units in values)', () => {
    expect(parseNvidiaSmiCsv(h100QueryCsv('load'))).toEqual({
      gpus: [
        {
          index: 0,
          uuid: H100_UUID,
          name: 'NVIDIA H100 80GB HBM3',
          gpuClass: 'NVIDIA H100 80GB HBM3',
          memoryTotalBytes: 81559 * MIB,
          memoryUsedBytes: 19818 * MIB,
          utilizationPct: 100,
          temperatureC: 59,
          eccErrors: 0,
          healthy: true,
        },
      ],
      problems: [],
    });
  });

  it('keeps a real idle 0% utilisation as 0 (a measured zero is not absent)', () => {
    const [gpu] = parseNvidiaSmiCsv(h100QueryCsv('idle')).gpus;
    expect(gpu.utilizationPct).toBe(0);
    expect(gpu.memoryUsedBytes).toBe(0);
    expect(gpu.temperatureC).toBe(41);
  });

  it('reads the Tesla P100 csv,nounits file: no index column → row order, total = reserved + used + free, no ECC column → absent', () => {
    const { gpus, problems } = parseNvidiaSmiCsv(withoutProvenance(readFixture(P100_CSV)));
    expect(problems).toEqual([]);
    expect(gpus).toEqual([
      {
        index: 0,
        uuid: 'GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6',
        name: 'Tesla P100-PCIE-16GB',
        gpuClass: 'Tesla P100-PCIE-16GB',
        memoryTotalBytes: (103 + 0 + 16280) * MIB,
        memoryUsedBytes: 0,
        utilizationPct: 0,
        temperatureC: 37,
        healthy: true,
      },
    ]);
    expect('eccErrors' in gpus[0]).toBe(false);
  });

  it('the agent query (noheader,nounits) rebuilt from the capture gives the same GPU as the capture itself', () => {
    for (const phase of ['idle', 'load'] as const) {
      const viaHeader = parseNvidiaSmiCsv(h100QueryCsv(phase));
      const viaQuery = parseNvidiaSmiCsv(asAgentQueryRow(h100QueryCsv(phase)) + '\n');
      expect(viaQuery).toEqual(viaHeader);
    }
  });

  it('asks nvidia-smi for utilization.gpu last, without header or units', () => {
    expect(NVIDIA_SMI_QUERY_ARGS).toEqual([
      '--query-gpu=index,uuid,name,memory.total,memory.used,temperature.gpu,ecc.errors.uncorrected.volatile.total,utilization.gpu',
      '--format=csv,noheader,nounits',
    ]);
  });
});

describe('parseNvidiaSmiCsv: utilisation optional, absent is not zero', () => {
  const loadRow = asAgentQueryRow(h100QueryCsv('load'));
  const sevenFieldRow = asAgentQueryRow(h100QueryCsv('load'), { withUtilization: false });

  it('a 7-field row (driver without utilization.gpu) keeps the GPU with utilisation undefined, not 0', () => {
    const { gpus, problems } = parseNvidiaSmiCsv(`${sevenFieldRow}\n`);
    expect(problems).toEqual([]);
    expect(gpus).toHaveLength(1);
    expect(gpus[0].utilizationPct).toBeUndefined();
    expect('utilizationPct' in gpus[0]).toBe(false);
    expect(gpus[0].memoryTotalBytes).toBe(81559 * MIB);
    expect(JSON.parse(JSON.stringify(gpus[0]))).not.toHaveProperty('utilizationPct');
  });

  it('a whole node of 7-field rows keeps every GPU', () => {
    const rows = [0, 1, 2, 3].map((i) => sevenFieldRow.replace(/^0, GPU-00000000/, `${i}, GPU-0000000${i}`)).join('\n');
    const { gpus, problems } = parseNvidiaSmiCsv(rows);
    expect(problems).toEqual([]);
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3]);
    expect(gpus.every((g) => g.utilizationPct === undefined)).toBe(true);
  });

  // Variations on the real H100 row: one field replaced by what nvidia-smi prints when it has no value.
  const replaceField = (row: string, field: number, value: string) => row.split(', ').map((v, i) => (i === field ? value : v)).join(', ');
  it.each([
    ['[N/A]', 7, 'utilizationPct'],
    ['N/A', 7, 'utilizationPct'],
    ['[Not Supported]', 7, 'utilizationPct'],
    ['[Unknown Error]', 7, 'utilizationPct'],
    ['', 7, 'utilizationPct'],
    ['[N/A]', 5, 'temperatureC'],
    ['[Not Supported]', 6, 'eccErrors'],
    ['[N/A]', 4, 'memoryUsedBytes'],
  ] as const)('%j in field %i leaves %s undefined and the GPU healthy', (token, field, key) => {
    const { gpus, problems } = parseNvidiaSmiCsv(replaceField(loadRow, field, token));
    expect(problems).toEqual([]);
    expect(gpus).toHaveLength(1);
    expect(gpus[0][key]).toBeUndefined();
    expect(key in gpus[0]).toBe(false);
    expect(gpus[0].healthy).toBe(true);
  });

  it('handles CRLF line ends and blank lines', () => {
    const { gpus } = parseNvidiaSmiCsv(`\r\n${loadRow}\r\n\r\n`);
    expect(gpus).toHaveLength(1);
    expect(gpus[0].utilizationPct).toBe(100);
  });

  it('accepts a value with its unit (format without nounits)', () => {
    const [gpu] = parseNvidiaSmiCsv('0, GPU-1, Tesla T4, 15360 MiB, 0 MiB, 30, 0, 7 %').gpus;
    expect(gpu.memoryTotalBytes).toBe(15360 * MIB);
    expect(gpu.utilizationPct).toBe(7);
  });
});

describe('parseNvidiaSmiCsv: health', () => {
  const loadRow = asAgentQueryRow(h100QueryCsv('load'));
  const replaceField = (row: string, field: number, value: string) => row.split(', ').map((v, i) => (i === field ? value : v)).join(', ');

  it('uncorrected volatile ECC errors > 0 → unhealthy, with the count kept', () => {
    const [gpu] = parseNvidiaSmiCsv(replaceField(loadRow, 6, '2')).gpus;
    expect(gpu.eccErrors).toBe(2);
    expect(gpu.healthy).toBe(false);
  });

  it.each(['[GPU requires reset]', '[GPU is lost]'])('%s in any field → unhealthy, that field absent', (state) => {
    const [gpu] = parseNvidiaSmiCsv(replaceField(loadRow, 5, state)).gpus;
    expect(gpu.healthy).toBe(false);
    expect(gpu.temperatureC).toBeUndefined();
  });
});

describe('parseNvidiaSmiCsv: malformed rows are reported, the others still parse', () => {
  const good = asAgentQueryRow(h100QueryCsv('load'));
  const second = good.replace(/^0, GPU-00000000/, '1, GPU-00000001');

  it.each([
    ['too few fields', '2, GPU-2, Tesla T4, 15360, 0, 30', /line 2: expected 7 or 8 fields .* got 6; GPU skipped: "2, GPU-2, Tesla T4, 15360, 0, 30"/],
    ['too many fields (a comma in a name cannot be told apart)', '2, GPU-2, Tesla, T4, 15360, 0, 30, 0, 5', /line 2: .*got 9/],
    ['a driver error line', 'Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error', /line 2: .*got 1; GPU skipped: "Unable to determine/],
    ['index not a number', 'x, GPU-2, Tesla T4, 15360, 0, 30, 0, 5', /line 2: no usable index "x"; GPU skipped/],
    ['uuid absent', '2, [N/A], Tesla T4, 15360, 0, 30, 0, 5', /line 2: no usable uuid "\[N\/A\]"/],
    ['memory.total absent', '2, GPU-2, Tesla T4, [N/A], 0, 30, 0, 5', /line 2: no usable memory.total "\[N\/A\]"/],
    ['duplicate index', '0, GPU-2, Tesla T4, 15360, 0, 30, 0, 5', /line 2: duplicate GPU index 0/],
  ])('%s', (_what, bad, message) => {
    const { gpus, problems } = parseNvidiaSmiCsv([good, bad, second].join('\n'));
    expect(gpus.map((g) => g.index)).toEqual([0, 1]);
    expect(problems).toHaveLength(1);
    expect(`${problems[0].path}: ${problems[0].message}`).toMatch(message);
  });

  it.each([
    ['temperature not a number', 5, 'abc', 'temperatureC', /line 1: temperature.gpu "abc" is not a number; treated as unknown/],
    ['utilisation over 100', 7, '101', 'utilizationPct', /line 1: utilization.gpu 101 is out of range \(must be in 0..100\)/],
    ['negative ECC count', 6, '-1', 'eccErrors', /line 1: ecc.errors.uncorrected.volatile.total -1 is out of range/],
  ] as const)('an unreadable optional field (%s) keeps the GPU, the field unknown, and reports it', (_what, field, value, key, message) => {
    const row = good.split(', ').map((v, i) => (i === field ? value : v)).join(', ');
    const { gpus, problems } = parseNvidiaSmiCsv(row);
    expect(gpus).toHaveLength(1);
    expect(gpus[0][key]).toBeUndefined();
    expect(problems).toHaveLength(1);
    expect(`${problems[0].path}: ${problems[0].message}`).toMatch(message);
  });

  it('a header without a needed column is one problem and no GPUs', () => {
    const { gpus, problems } = parseNvidiaSmiCsv('index, name, memory.total [MiB]\n0, Tesla T4, 15360\n');
    expect(gpus).toEqual([]);
    expect(problems).toEqual([{ path: 'line 1', message: expect.stringContaining('header lacks column(s) uuid') }]);
  });

  it('a header row whose data row has the wrong field count is reported', () => {
    const { gpus, problems } = parseNvidiaSmiCsv('index, uuid, name, memory.total [MiB]\n0, GPU-1, Tesla T4\n1, GPU-2, Tesla T4, 15360\n');
    expect(gpus.map((g) => g.uuid)).toEqual(['GPU-2']);
    expect(problems[0].message).toMatch(/expected 4 fields as in the header, got 3/);
  });

  it('empty output is no GPUs and no problems', () => {
    expect(parseNvidiaSmiCsv('')).toEqual({ gpus: [], problems: [] });
  });
});

describe('parseNvidiaSmiCsv: GPU class', () => {
  it('maps the reported name through gpuClassOf; names with spaces are kept whole', () => {
    const row = asAgentQueryRow(h100QueryCsv('idle'));
    const [gpu] = parseNvidiaSmiCsv(row, { gpuClassOf: (n) => (n === 'NVIDIA H100 80GB HBM3' ? 'H100-80GB' : n) }).gpus;
    expect(gpu.name).toBe('NVIDIA H100 80GB HBM3');
    expect(gpu.gpuClass).toBe('H100-80GB');
  });
});
